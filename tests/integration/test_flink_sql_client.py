"""Apache Flink's SQL Client speaks to any peer: the conversation its gateway mode has
(sql-client.sh -e / --endpoint), as Flink's REST message classes define it, played with
a plain HTTP client against real peers (in-process, real Raft and aiohttp) and a real
Spark Connect server: its whole Flink configuration as the session's properties, Flink's
SET 'k' = 'v' / RESET, SHOW TABLES, EXPLAIN, completion, configure-session, heartbeat,
closing; and the session going on, its Flink SETs replayed, after its peer stops."""
import pytest

from tests.conftest import running
from tests.helpers import ahttp, apoll

pytestmark = pytest.mark.slow

# what Flink's SQL Client sends as the session's properties: its whole configuration
FLINK_CONF = {
    "execution.runtime-mode": "streaming", "execution.target": "remote",
    "execution.attached": "true", "execution.shutdown-on-attached-exit": "false",
    "execution.checkpointing.interval": "10 s",
    "sql-client.execution.result-mode": "table",
    "sql-client.execution.max-table-result.rows": "1000000",
    "sql-client.display.max-column-width": "30", "sql-client.verbose": "false",
    "table.exec.state.ttl": "0 ms", "table.exec.mini-batch.enabled": "false",
    "table.exec.sink.not-null-enforcer": "ERROR", "table.local-time-zone": "default",
    "table.sql-dialect": "default", "table.dml-sync": "false",
    "table.optimizer.join-reorder-enabled": "false",
    "pipeline.name": "Flink SQL Client", "pipeline.jars": "file:/opt/flink/opt/x.jar",
    "pipeline.classpaths": "", "parallelism.default": "1", "rest.address": "localhost",
    "rest.port": "8081", "jobmanager.rpc.address": "localhost", "jobmanager.rpc.port": "6123",
    "jobmanager.memory.process.size": "1600m", "taskmanager.memory.process.size": "1728m",
    "taskmanager.numberOfTaskSlots": "1", "jobmanager.execution.failover-strategy": "region",
    "$internal.deployment.config-dir": "/opt/flink/conf", "state.backend.type": "hashmap",
    "client.timeout": "60 s", "env.java.opts.all": "--add-exports=java.base/sun.net.util="
                                                   "ALL-UNNAMED -Dlog4j2.isThreadContextMapInheritable=true",
}
SETTINGS = {"sql-gateway.page-rows": 4, "sql-gateway.fetch-wait": "200 ms",
            "spark.driver.memory": "512m"}


@pytest.fixture
async def sqlc(tmp_path):
    async with running(str(tmp_path), 3, SETTINGS, spark=True) as c:
        yield c


async def open_flink_session(c, peer=0):
    s, b = await ahttp("POST", c.url(peer) + "/v2/sessions",
                       {"sessionName": "Flink SQL Client", "properties": FLINK_CONF})
    assert s == 200, b
    return b["sessionHandle"]


async def statement(c, sh, sql, peer=0, version="v2", config=None):
    """Execute as the SQL Client does and page with rowFormat=JSON to EOS: the answer's
    (resultKind, isQueryResult, column names, rows, operation handle), or (status, body)
    of a failure."""
    body = {"statement": sql, "executionTimeout": 0, "executionConfig": config or {}}
    s, b = await ahttp("POST", f"{c.url(peer)}/{version}/sessions/{sh}/statements", body)
    if s != 200:
        return s, b
    oh = b["operationHandle"]
    uri = f"/{version}/sessions/{sh}/operations/{oh}/result/0?rowFormat=JSON"
    rows, cols, kind, query = [], [], None, None
    while uri:
        s, b = await ahttp("GET", c.url(peer) + uri)
        if s != 200:
            return s, b
        if b["resultType"] != "NOT_READY":
            kind, query = b["resultKind"], b["isQueryResult"]
            cols = [col["name"] for col in b["results"]["columns"]] or cols
            rows += [d["fields"] for d in b["results"]["data"]]
        uri = b.get("nextResultUri")
    return kind, query, cols, rows, oh


async def ok(c, sh, sql, peer=0, version="v2"):
    got = await statement(c, sh, sql, peer, version)
    assert got[:4] == ("SUCCESS", False, ["result"], [["OK"]]), (sql, got)  # Flink's


async def conf(c, sh, key, peer=0):
    got = await statement(c, sh, f"SET {key}", peer)
    assert got[2] == ["key", "value"], got
    return got[3][0][1]


async def complete(c, sh, text, position=None, peer=0, version="v2"):
    body = {"statement": text, "position": len(text) if position is None else position}
    return await ahttp("GET", f"{c.url(peer)}/{version}/sessions/{sh}/complete-statement",
                       body)


async def test_the_sql_clients_conversation_with_any_peer(sqlc):
    s, b = await ahttp("GET", sqlc.url(1) + "/api_versions")
    assert s == 200 and "V2" in b["versions"]
    sh = await open_flink_session(sqlc, 0)
    s, info = await ahttp("GET", f"{sqlc.url(2)}/v2/sessions/{sh}")
    assert s == 200 and info["properties"] == FLINK_CONF  # the session works with them all
    # a query with executionConfig (Flink keys, and a Spark one), paged to EOS
    got = await statement(sqlc, sh, "SELECT id, id * 2 AS twice FROM range(10) ORDER BY id",
                          peer=1, config={"execution.runtime-mode": "batch",
                                          "spark.sql.shuffle.partitions": "2"})
    assert got[:4] == ("SUCCESS_WITH_CONTENT", True, ["id", "twice"],
                       [[i, 2 * i] for i in range(10)]), got
    # (the statement's own: the session keeps its property, as Flink's gateway does)
    assert await conf(sqlc, sh, "`execution.runtime-mode`", peer=1) == "streaming"
    # Flink's SET and RESET: quoted keys and values, Flink's OK answer; Flink-only keys
    # are kept by the session (Spark's runtime conf takes any non-static key)
    await ok(sqlc, sh, "SET 'sql-client.execution.result-mode' = 'TABLEAU';", peer=2)
    await ok(sqlc, sh, "SET 'spark.sql.shuffle.partitions' = '3'")
    await ok(sqlc, sh, "SET 'pipeline.name' = 'it''s; a `job`'", peer=1, version="v1")
    assert await conf(sqlc, sh, "spark.sql.shuffle.partitions", peer=1) == "3"
    listing = await statement(sqlc, sh, "SET;", peer=2)  # Flink's SET alone: a listing
    assert listing[:3] == ("SUCCESS_WITH_CONTENT", True, ["key", "value"]), listing
    props = dict(map(tuple, listing[3]))
    assert props["sql-client.execution.result-mode"] == "TABLEAU"
    assert props["pipeline.name"] == "it's; a `job`"
    assert props["table.exec.mini-batch.enabled"] == "false"  # from the properties
    await ok(sqlc, sh, "RESET 'spark.sql.shuffle.partitions'")
    assert await conf(sqlc, sh, "spark.sql.shuffle.partitions") != "3"
    await ok(sqlc, sh, "RESET 'sql-client.execution.result-mode'")
    # SHOW TABLES and EXPLAIN, as Spark answers them
    got = await statement(sqlc, sh, "CREATE TEMPORARY VIEW flink_orders AS "
                                    "SELECT id AS order_id FROM range(3)", peer=1)
    assert got[0] in ("SUCCESS", "SUCCESS_WITH_CONTENT"), got
    got = await statement(sqlc, sh, "SHOW TABLES", peer=2)
    assert got[2] == ["namespace", "tableName", "isTemporary"], got
    assert ["", "flink_orders", True] in got[3], got
    got = await statement(sqlc, sh, "EXPLAIN SELECT order_id FROM flink_orders WHERE "
                                    "order_id > 1")
    assert got[2] == ["plan"] and len(got[3]) == 1, got
    assert "== Physical Plan ==" in got[3][0][0], got
    # completion (a GET with a JSON body), on any peer and any version path
    s, b = await complete(sqlc, sh, "sel", peer=1)
    assert s == 200 and b == {"candidates": ["select"]}, b
    s, b = await complete(sqlc, sh, "SELECT * FROM flink_o", peer=2, version="v1")
    assert s == 200 and b["candidates"][0] == "flink_orders", b
    s, b = await complete(sqlc, sh, "SELECT count(*) FROM flink_orders", position=10)
    assert s == 200 and "count" in b["candidates"] and "COUNT" not in b["candidates"], b
    s, b = await ahttp("GET", f"{sqlc.url(0)}/sessions/{sh}/complete-statement",
                       {"statement": "SELECT * FR", "position": 11})
    assert s == 200 and b["candidates"][0] == "FROM", b
    for body, field in (({"position": 1}, "statement"), ({"statement": "SELECT"}, "position"),
                        ({"statement": "SELECT", "position": 9}, "out of range"),
                        (None, "statement")):
        s, b = await ahttp("GET", f"{sqlc.url(1)}/v2/sessions/{sh}/complete-statement", body)
        assert s == 400 and field in b["errors"][0], (body, b)
    s, b = await complete(sqlc, "00000000-0000-0000-0000-000000000000", "sel", peer=2)
    assert s == 404 and b["errors"], b
    # configure-session with Flink's SET (v2's), then the setting is there
    s, b = await ahttp("POST", f"{sqlc.url(2)}/v2/sessions/{sh}/configure-session",
                       {"statement": "SET 'spark.sql.session.timeZone' = 'America/New_York'"})
    assert s == 200, b
    got = await statement(sqlc, sh, "SELECT current_timezone() AS tz", peer=1)
    assert got[3] == [["America/New_York"]], got
    s, b = await ahttp("POST", f"{sqlc.url(1)}/v2/sessions/{sh}/configure-session",
                       {"statement": "RESET"})
    assert s == 200, b
    assert await conf(sqlc, sh, "spark.sql.session.timeZone") != "America/New_York"
    # (Flink's RESET: back to the session's properties, not to Spark's defaults)
    assert await conf(sqlc, sh, "`table.exec.mini-batch.enabled`") == "false"
    assert await conf(sqlc, sh, "`sql-client.execution.result-mode`") == "table"
    # heartbeat, closing an operation and the session
    s, _ = await ahttp("POST", f"{sqlc.url(0)}/v2/sessions/{sh}/heartbeat")
    assert s == 200
    oh = got[4]
    s, b = await ahttp("DELETE", f"{sqlc.url(2)}/v2/sessions/{sh}/operations/{oh}/close")
    assert s == 200 and b == {"status": "CLOSED"}, b
    s, b = await ahttp("DELETE", f"{sqlc.url(1)}/v2/sessions/{sh}")
    assert s == 200 and b == {"status": "CLOSED"}, b
    s, b = await ahttp("GET", f"{sqlc.url(0)}/v2/sessions/{sh}")
    assert s == 404


async def test_flink_sets_are_replayed_in_sparks_syntax_on_the_next_peer(tmp_path):
    """The session's peer stops: the session moves, its properties and its Flink SETs
    (recorded translated) are replayed on the new holder, and the client goes on."""
    async with running(str(tmp_path), 3, SETTINGS, spark=True) as c:
        victim = c.peers[1]  # peer 0 runs the shared Spark server of this in-process cluster
        sh = await open_flink_session(c, 1)  # placed on the receiving peer while all hold none
        s, info = await ahttp("GET", f"{c.url(0)}/v2/sessions/{sh}")
        assert info["node"] == victim.node
        await ok(c, sh, "SET 'spark.sql.shuffle.partitions' = '5'", peer=1)
        await ok(c, sh, "SET 'table.exec.mini-batch.enabled' = 'true'", peer=1)
        s, b = await ahttp("POST", f"{c.url(1)}/v2/sessions/{sh}/configure-session",
                           {"statement": "SET 'spark.sql.session.timeZone' = 'Asia/Tokyo'"})
        assert s == 200, b

        def recorded():
            with c.peers[0].parts.raft.read() as st:
                replay = list(st.sessions[sh].statements)
            return replay if len(replay) == 3 else None
        replay = await apoll(recorded, 30, what="the three statements recorded")
        assert replay == ["SET spark.sql.shuffle.partitions=5",
                          "SET `table.exec.mini-batch.enabled`=`true`",
                          "SET spark.sql.session.timeZone=Asia/Tokyo"], replay
        # an executionConfig is the statement's own (Flink's): it does not stay in the
        # session, and it goes with the statement to the session's next holder
        lima = {"spark.sql.session.timeZone": "America/Lima"}
        got = await statement(c, sh, "SELECT current_timezone() AS tz", 1, config=lima)
        assert got[3] == [["America/Lima"]], got
        got = await statement(c, sh, "SELECT current_timezone() AS tz", 1)
        assert got[3] == [["Asia/Tokyo"]], got
        s, b = await ahttp("POST", f"{c.url(1)}/v2/sessions/{sh}/statements",
                           {"statement": "SELECT current_timezone() AS tz",
                            "executionConfig": lima})
        assert s == 200, b
        read_on_victim = b["operationHandle"]

        c.peers.remove(victim)
        await victim.stop()  # no more heartbeats: declared dead, its sessions move
        # (c.url(1) is the stopped peer's: the client goes on through peers 0 and 2)

        async def moved():
            s, info = await ahttp("GET", f"{c.url(0)}/v2/sessions/{sh}")
            return info if s == 200 and info["node"] != victim.node else None
        info = await apoll(moved, 60, interval=0.2, what="the session moved")
        assert info["moves"] == 1 and info["properties"] == FLINK_CONF
        assert await conf(c, sh, "spark.sql.shuffle.partitions", peer=2) == "5"
        assert await conf(c, sh, "`table.exec.mini-batch.enabled`") == "true"
        assert await conf(c, sh, "`sql-client.execution.result-mode`") == "table"
        got = await statement(c, sh, "SELECT current_timezone() AS tz", peer=2)
        assert got[3] == [["Asia/Tokyo"]], got

        async def rerun():  # the read that ran on the victim runs again here, with its config
            s, b = await ahttp("GET", f"{c.url(2)}/v2/sessions/{sh}/operations/"
                                      f"{read_on_victim}/result/0?rowFormat=JSON")
            assert s == 200, b
            return b if b["resultType"] != "NOT_READY" else None
        b = await apoll(rerun, 60, what="the read run again")
        assert [d["fields"] for d in b["results"]["data"]] == [["America/Lima"]], b
        await ok(c, sh, "SET 'spark.sql.shuffle.partitions' = '6'", peer=2)
        assert await conf(c, sh, "spark.sql.shuffle.partitions") == "6"
