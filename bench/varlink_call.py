"""One call of monitord's varlink interface, for the benchmarks."""
import json
import socket


def call(socket_path, method, params=None):
    """Calls io.monitord.Monitor.<method> on the daemon at socket_path; returns the reply's
    parameters, or raises RuntimeError with the error reply."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(socket_path)
        msg = {"method": "io.monitord.Monitor." + method, "parameters": params or {}}
        s.sendall(json.dumps(msg).encode() + b"\0")
        buf = b""
        while not buf.endswith(b"\0"):
            chunk = s.recv(1 << 16)
            if not chunk:
                raise OSError("monitord closed the connection")
            buf += chunk
    reply = json.loads(buf[:-1])
    if "error" in reply:
        raise RuntimeError(f"{method}: {reply}")
    return reply["parameters"]
