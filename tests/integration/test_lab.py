"""`make lab`: JupyterLab serves the notebooks with the project's environment as the kernel.

The reader's home (issue #39): the test starts JupyterLab exactly as ``make lab`` does (on a
free loopback port, no browser), checks that the Lab page of a notebook is served, opens a
kernel session on that notebook through the server's REST API and runs the notebook's first
cells (its imports and its tagged ``parameters`` cell) over the kernel's websocket, as the
Lab front end does when the reader presses Run. Every cell must finish without an error, in
the project's ``.venv`` Python.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "03_afl.ipynb"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, token: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback)
        return response.status, response.read()


def _first_cells(path: Path) -> list[str]:
    """The notebook's code cells up to and including its ``parameters`` cell."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    out = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        out.append("".join(cell["source"]))
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return out
    raise AssertionError(f"{path.name} has no cell tagged 'parameters'")


async def _run_cells(port: int, token: str, kernel_id: str, cells: list[str]) -> list[dict]:
    """Execute ``cells`` on the kernel over the server's websocket; the replies' contents."""
    from tornado.websocket import websocket_connect

    url = f"ws://127.0.0.1:{port}/api/kernels/{kernel_id}/channels?token={token}"
    connection = await websocket_connect(url)
    replies = []
    session = uuid.uuid4().hex
    for code in cells:
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": "execute_request", "username": "test",
                  "session": session, "version": "5.3", "date": ""}  # fmt: skip
        await connection.write_message(json.dumps({
            "header": header, "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": True,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
        }))  # fmt: skip
        while True:
            raw = await connection.read_message()
            assert raw is not None, "the kernel's websocket closed"
            message = json.loads(raw)
            if (
                message.get("channel") == "shell"
                and message["parent_header"].get("msg_id") == msg_id
            ):
                replies.append(message["content"])
                break
    connection.close()
    return replies


def test_make_lab_serves_a_notebook_and_runs_its_first_cells(tmp_path):
    import asyncio

    port, token = _free_port(), secrets.token_hex(8)
    lab_args = f"--no-browser --port {port} --IdentityProvider.token={token}"
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    server = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_ARGS={lab_args}"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, "make lab exited"
            try:
                status, _ = _get(f"{base}/api/status", token)
                if status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "JupyterLab did not answer within 180 s"
            time.sleep(1)
        status, page = _get(f"{base}/lab/tree/{NOTEBOOK}", token)
        assert status == 200 and b"JupyterLab" in page
        body = json.dumps({"path": NOTEBOOK, "type": "notebook", "name": NOTEBOOK,
                           "kernel": {"name": "python3"}}).encode()  # fmt: skip
        request = urllib.request.Request(
            f"{base}/api/sessions", data=body, method="POST",
            headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
            kernel_id = json.loads(response.read())["kernel"]["id"]
        cells = _first_cells(ROOT / "notebooks" / NOTEBOOK)
        cells.append("import sys; print(sys.executable)")
        replies = asyncio.run(_run_cells(port, token, kernel_id, cells))
        failed = [(i, r.get("ename"), r.get("evalue")) for i, r in enumerate(replies)
                  if r.get("status") != "ok"]  # fmt: skip
        assert not failed, f"cells of {NOTEBOOK} failed in JupyterLab: {failed}"
        assert len(replies) == len(cells)
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)


def test_the_kernel_is_the_projects_python():
    """The default kernel runs the server's own Python: the one `make lab` starts from .venv."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    assert Path(spec.argv[0]).name.startswith("python")
    if spec.argv[0] in {"python", "python3"}:
        return  # jupyter_client replaces it by sys.executable at launch
    assert Path(spec.argv[0]).resolve() == Path(sys.executable).resolve()
