"""Run inside `unshare -n` (or -rn) by tests/integration/test_serve_network.py: never alone.

In the namespace's own loopback device, with a second address (NETWORK_ADDRESS) that
is not a loopback address, it tries to serve `candor serve`'s app on 0.0.0.0 with no
origins configured. If the app is built, it is served and a client at NETWORK_ADDRESS,
another machine as far as the server can tell, sends the server's own Origin. Prints
one JSON line: {"refused": message} or {"status": code, "reason": ...}.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from candor.api.local import create_local_app
from candor.deps import Deps
from candor.errors import ConfigurationError
from candor.settings import Settings
from tests.support.widget_server import serve

NETWORK_ADDRESS = "10.213.0.2"


def no_deps() -> Deps:
    # Whatever gets past the edge finds no dependencies (503): the edge is what is tested.
    raise ConfigurationError("the network test builds no dependencies")


def main() -> int:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "addr", "add", f"{NETWORK_ADDRESS}/32", "dev", "lo"], check=True)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", 0))
    port = sock.getsockname()[1]
    settings = Settings(data_dir=Path(tempfile.mkdtemp()), allowed_origins=())
    try:
        app = create_local_app(settings, host="0.0.0.0", port=port)
    except ConfigurationError as error:
        print(json.dumps({"refused": str(error)}))
        return 0
    app.state.deps_provider = no_deps
    with serve(app, sock):
        connection = http.client.HTTPConnection(
            NETWORK_ADDRESS, port, timeout=10, source_address=(NETWORK_ADDRESS, 0)
        )
        connection.request(
            "POST",
            "/ask",
            body=b'{"question": "What does --force-with-lease do?"}',
            headers={"content-type": "application/json", "origin": f"http://127.0.0.1:{port}"},
        )
        response = connection.getresponse()
        body = json.loads(response.read())
        print(json.dumps({"status": response.status, "reason": body.get("reason")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
