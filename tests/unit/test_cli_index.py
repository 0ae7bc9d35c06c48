"""The CLI passes along the highest X-JM-Index it was sent (X-JM-Min-Index), so an upload
answered by one peer and a submission answered by another see the same history."""
import http.server
import json

from jm.client.cli import main
from tests.helpers import http_server


class _Peer(http.server.BaseHTTPRequestHandler):
    seen: list = []  # (method, path, X-JM-Min-Index)
    index = 0

    def _answer(self, status: int, body: dict) -> None:
        type(self).index += 7
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-JM-Index", str(type(self).index))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append(("POST", self.path, self.headers.get("X-JM-Min-Index")))
        if self.path == "/artifacts":
            self._answer(201, {"id": "sha256:ab", "name": "j.py", "size": 1,
                               "pyfile": "artifact:sha256:ab"})
        else:
            self._answer(202, {"jobid": "j1"})

    def log_message(self, *args):
        pass


def test_submit_sends_the_index_of_its_upload(tmp_path, capsys):
    with http_server(_Peer) as port:
        job = tmp_path / "j.py"
        job.write_text("def main(ctx):\n    return 1\n")
        rc = main(["--address", f"127.0.0.1:{port}", "submit", str(job)])
        assert rc == 0, capsys.readouterr().err
        assert capsys.readouterr().out.strip() == "j1"
        assert _Peer.seen == [("POST", "/artifacts", None), ("POST", "/jobs", "7")]


def test_savepoint_locations_on_the_command_line():
    """A URI goes to the peers as written (they make it canonical or refuse it); a path
    is made absolute where the user typed it."""
    import os
    from jm.client.cli_http import savepoint_location
    for uri in ("s3a://bucket/sp", "s3://b/x", "hdfs://nn:8020/sp", "file:///sp", "file:/sp",
                "gs://b/x"):
        assert savepoint_location(uri) == uri
    assert savepoint_location("sp/one") == os.path.join(os.getcwd(), "sp/one")
    assert savepoint_location("/abs/sp") == "/abs/sp"
