"""The web UI in a real headless Chromium (Debian's chromium + chromedriver, driven by
selenium) against 3 real peer processes: see the peers and the leader, submit a job by
uploading a .py file, cancel it (with confirmation), and watch a failover on the page
after the peer running a job is killed. Screenshots of the main pages go to tmp_path, or
to docs/screenshots with JM_UPDATE_SCREENSHOTS=1."""
import os
import re
import signal
import time
import urllib.request

import pytest

from raft.protocol import PROTOCOL
from tests.e2e.procs import ProcessCluster
from tests.helpers import ROOT, http, poll

pytestmark = pytest.mark.slow

JOB_PY = '''import time


def main(ctx):
    print("ui job started", flush=True)
    while not ctx.stop_requested.wait(0.1):
        pass
    return "stopped"
'''


@pytest.fixture
def cluster(tmp_path):
    c = ProcessCluster(str(tmp_path), 3, {"spark.connect.embedded": False,
                                          "jobmanager.executor.preload": "none",
                                          "restart-strategy.type": "none"})
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--window-size=1280,900"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()  # also ends chromedriver and every chromium process it started


def shot(driver, tmp_path, name):
    folder = os.path.join(ROOT, "docs", "screenshots") if os.environ.get(
        "JM_UPDATE_SCREENSHOTS") else str(tmp_path)
    os.makedirs(folder, exist_ok=True)
    driver.save_screenshot(os.path.join(folder, f"{name}.png"))


def text_of(driver, css):
    from selenium.webdriver.common.by import By
    return " ".join(e.text for e in driver.find_elements(By.CSS_SELECTOR, css))


def test_dashboard_submit_cancel_and_failover(cluster, browser, tmp_path):
    from selenium.webdriver.common.by import By
    c, d = cluster, browser
    d.get(c.urls[0] + "/")
    # cluster page: 3 peers ALIVE, one leader
    poll(lambda: text_of(d, "#peers tbody").count("ALIVE") == 3 and
         "leader" in text_of(d, "#peers tbody"), 30, what="3 live peers and a leader")
    poll(lambda: re.search(rf"\b{PROTOCOL}\s*protocol\b", text_of(d, "#overview")), 10,
         what="the cluster's protocol in the overview")
    shot(d, tmp_path, "cluster")

    # submit: upload a .py, run its main
    job_file = tmp_path / "ui_job.py"
    job_file.write_text(JOB_PY)
    d.find_element(By.ID, "nav-submit").click()
    poll(lambda: d.find_elements(By.ID, "s-file"), 10, what="submit form")
    d.find_element(By.ID, "s-file").send_keys(str(job_file))
    d.find_element(By.ID, "s-name").send_keys("from-the-ui")
    d.find_element(By.ID, "s-go").click()
    poll(lambda: "#/job/" in d.current_url, 20, what="the job page")
    jid = d.current_url.split("#/job/")[1]
    poll(lambda: "RUNNING" in text_of(d, "#job-facts"), 30, what="RUNNING on the page")
    poll(lambda: "ui job started" in text_of(d, "#log"), 30, what="the live log tail")
    poll(lambda: http("GET", c.urls[1] + f"/jobs/{jid}")[1]["name"] == "from-the-ui", 10,
         what="the job on another peer")
    # the page keeps the highest X-JM-Index it was sent (and sends it back)
    with urllib.request.urlopen(c.urls[0] + "/overview", timeout=10) as resp:
        applied = int(resp.headers["X-JM-Index"])
    assert 0 < d.execute_script("return minIndex;") <= applied
    shot(d, tmp_path, "job")

    # jobs page lists it
    d.find_element(By.ID, "nav-jobs").click()
    poll(lambda: d.find_elements(By.CSS_SELECTOR, f'tr[data-job="{jid}"]'), 20,
         what="the job in the table")
    assert text_of(d, "#pg-info") == "1-1 of 1"  # one page, from GET /jobs?limit=...
    assert not d.find_element(By.ID, "pg-next").is_enabled()
    shot(d, tmp_path, "jobs")

    # cancel, with the confirmation dialog
    d.get(c.urls[1] + f"/#/job/{jid}")
    poll(lambda: "RUNNING" in text_of(d, "#job-facts"), 30, what="job page again")
    d.find_element(By.ID, "btn-cancel").click()
    poll(lambda: d.find_element(By.ID, "confirm").is_displayed(), 10, what="the dialog")
    d.find_element(By.ID, "confirm-yes").click()
    poll(lambda: "CANCELED" in text_of(d, "#job-facts"), 30, what="CANCELED on the page")
    poll(lambda: http("GET", c.urls[2] + f"/jobs/{jid}")[1]["state"] == "CANCELED", 10,
         what="CANCELED on another peer")

    # a submission whose answer was lost, sent again: the same X-Request-Id, one job
    d.get(c.urls[0] + "/#/submit")
    poll(lambda: d.find_elements(By.ID, "s-file"), 10, what="submit form")
    d.execute_script("""
      const real = window.fetch;
      window.lostAnswers = 0;
      window.fetch = async (path, opts) => {
        const resp = await real(path, opts);  // (sent and answered: the answer is lost)
        if (path === "/jobs" && opts.method === "POST" && window.lostAnswers++ === 0)
          throw new TypeError("the answer was lost (test)");
        return resp;
      };""")
    d.find_element(By.ID, "s-file").send_keys(str(job_file))
    d.find_element(By.ID, "s-name").send_keys("sent-twice")
    d.find_element(By.ID, "s-go").click()
    poll(lambda: "answer was lost" in text_of(d, "#submit-out"), 20, what="the lost answer")
    d.find_element(By.ID, "s-go").click()
    poll(lambda: "#/job/" in d.current_url, 20, what="the job page after the retry")
    jid3 = d.current_url.split("#/job/")[1]
    poll(lambda: http("GET", c.urls[2] + f"/jobs/{jid3}")[0] == 200, 10, what="the job")
    twice = [j for j in http("GET", c.urls[2] + "/jobs/overview")[1]["jobs"]
             if j["name"] == "sent-twice"]
    assert [j["jid"] for j in twice] == [jid3], twice  # the retry named the same job
    http("PATCH", c.urls[0] + f"/jobs/{jid3}?mode=cancel")

    # failover: kill -9 the peer running a job and watch it run again elsewhere
    s, b = http("POST", c.urls[0] + "/jobs", {"entry": "ui_job:main",
                                              "pyfiles": [str(job_file)], "name": "victim"})
    jid2 = b["jobid"]
    job = poll(lambda: (lambda j: j if j["state"] == "RUNNING" else None)(
        http("GET", c.urls[0] + f"/jobs/{jid2}")[1]), 30, what="victim job running")
    victim = next(i for i, line in enumerate(c.lines)
                  if line.endswith(":" + job["node"].split(":")[1]))
    watcher = (victim + 1) % 3
    d.get(c.urls[watcher] + f"/#/job/{jid2}")
    poll(lambda: "RUNNING" in text_of(d, "#job-facts"), 30, what="victim job page")
    os.kill(c.peer_pid(victim), signal.SIGKILL)
    t0 = time.monotonic()
    poll(lambda: "peer-lost" in text_of(d, "#attempts") and
         "RUNNING" in text_of(d, "#job-facts"), 60, what="the failover on the page")
    assert time.monotonic() - t0 < 30
    rows = d.find_elements(By.CSS_SELECTOR, "#attempts tbody tr")
    assert len(rows) == 2 and job["node"] not in rows[1].text
    shot(d, tmp_path, "failover")
    d.get(c.urls[watcher] + "/#/")
    poll(lambda: "DEAD" in text_of(d, "#peers tbody"), 30, what="the dead peer on the page")
    http("PATCH", c.urls[watcher] + f"/jobs/{jid2}?mode=cancel")


def test_ui_asks_for_the_token_once(tmp_path, browser):
    from selenium.webdriver.common.by import By
    c = ProcessCluster(str(tmp_path), 1, {"spark.connect.embedded": False,
                                          "jobmanager.executor.preload": "none",
                                          "rest.auth.token": "ui-secret"})
    try:
        c.start()
        browser.get(c.urls[0] + "/")  # the shell loads without a token
        poll(lambda: browser.find_element(By.ID, "token-box").is_displayed(), 20,
             what="the token prompt")
        browser.find_element(By.ID, "token-input").send_keys("ui-secret")
        browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
        poll(lambda: "ALIVE" in text_of(browser, "#peers tbody"), 20, what="peers shown")
        browser.refresh()  # remembered
        poll(lambda: "ALIVE" in text_of(browser, "#peers tbody"), 20, what="peers again")
        assert not browser.find_element(By.ID, "token-box").is_displayed()
    finally:
        c.stop()
