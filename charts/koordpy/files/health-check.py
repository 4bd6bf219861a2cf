# The `helm test` hooks' check (templates/tests/health.yaml): GET each URL given as an argument and fail
# unless every answer is 200. "each:<url>" asks every address the URL's host name resolves to (a headless
# Service: every pod behind it). An https URL is verified against $CA_FILE when it is set; without it the
# certificate is not verified (a health endpoint: no credentials are sent, nothing secret is read).
import os
import socket
import ssl
import sys
import urllib.parse
import urllib.request

failed = 0
for arg in sys.argv[1:]:
    each = arg.startswith("each:")
    url = arg.removeprefix("each:")
    parts = urllib.parse.urlsplit(url)
    targets = [url]
    if each:
        infos = socket.getaddrinfo(parts.hostname, parts.port, type=socket.SOCK_STREAM)
        hosts = sorted({info[4][0] for info in infos})
        targets = [parts._replace(netloc=f"[{h}]:{parts.port}" if ":" in h else f"{h}:{parts.port}").geturl() for h in hosts]
        if not targets:
            print(f"FAIL {url}: no address")
            failed += 1
    context = None
    if parts.scheme == "https":
        ca = os.environ.get("CA_FILE")
        context = ssl.create_default_context(cafile=ca) if ca else ssl._create_unverified_context()
    for target in targets:
        try:
            with urllib.request.urlopen(target, timeout=10, context=context) as answer:
                body = answer.read(200).decode("utf-8", "replace").strip()
                print(f"ok   {target}: {answer.status} {body}")
        except Exception as exc:
            print(f"FAIL {target}: {exc}")
            failed += 1
sys.exit(1 if failed else 0)
