//! The client a fake agent inside a sandbox runs (Python, no shebang): it waits up to 20 s for
//! `requests.jsonl` in its working directory (a test may write it once it knows the pane), sends
//! each line on a connection of its own to `$1` when that is an absolute path (an agent's own
//! flags are not), else to `$HERDR_SOCKET_PATH` (the filter's socket inside), and leaves every
//! answer line in `answers.jsonl`, which appears whole at the end. It prints `socket=<path>`.

pub const CLIENT: &str = r#"
import os, socket, sys, time
deadline = time.time() + 20
while not os.path.exists("requests.jsonl") and time.time() < deadline:
    time.sleep(0.02)
path = next((a for a in sys.argv[1:2] if a.startswith("/")), os.environ.get("HERDR_SOCKET_PATH", ""))
out = open("answers.tmp", "w")
for line in open("requests.jsonl", "rb").read().split(b"\n"):
    if not line:
        continue
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        s.sendall(line + b"\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        out.write(data.decode().strip() + "\n")
    except OSError as e:
        out.write('{"client_error": "%s"}\n' % e.strerror)
    finally:
        s.close()
out.close()
os.rename("answers.tmp", "answers.jsonl")
print("socket=" + path)
"#;
