"""Viewer pages for a 160k-token request: time to answer each one, from the store.

Run: `.venv/bin/python -m bench.viewer_render [--tokens 160000] [--repeat 5]`.
A coding-agent session of `--tokens` tokens is curated by the `coding-agent` preset for a
128k-token model (so old tool results are cut and old turns dropped), written through the
real record builder and SQLite sink beside nine smaller turns of the same conversation,
then every page is rendered through `Viewer.handle` (store reads included) and the best
of `--repeat` times is printed with the page's size. The goal is under 1 s per page.
Timing belongs here, never in a pass/fail test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.conversations import coding_agent_session
from policies.loader import load_preset
from policies.tokens import TokenCounter
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.readers.query import record_conversation
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.sqlite import SqliteSink
from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.chat import CHAT
from proxy.viewer.app import Viewer
from proxy.viewer.auth import AdminKeys
from proxy.viewer.store import opener
from proxy.viewer.wire import ViewRequest

MODEL = "gpt-4o"
GOAL_S = 1.0


def fill(db: Path, tokens: int) -> str:
    """Ten turns of one session, the last `tokens` long; returns the last one's id."""
    policy = load_preset("coding-agent")
    counter = TokenCounter()
    builder = RecordBuilder(Redactor.build())
    session = coding_agent_session(7, tokens, MODEL)
    sink = SqliteSink(str(db))
    rid = ""
    for turn in range(10):
        messages = session[: max(3, len(session) * (turn + 1) // 10)]
        result = policy.curate(messages, {"model": MODEL}, counter)
        rid = f"bench{turn:02d}" + "0" * 20
        entry = ExchangeRecord(
            rid, 1_767_225_600.0 + turn, "POST", CHAT.path, route="agents",
            policy="coding-agent", mode="enforce", protocol=CHAT, model=MODEL,
            original=messages, curated=result.messages, actions=tuple(result.actions),
            tokens_before=result.tokens_before, tokens_after=result.tokens_after, status=200,
            response=b'{"choices": [{"message": {"role": "assistant", "content": "ok"}}]}',
        )  # fmt: skip
        sink.write_many([builder.build(entry)])
    sink.close()
    return rid


def timed(viewer: Viewer, target: str, repeat: int) -> tuple[float, int, int]:
    best, size, status = float("inf"), 0, 0
    for _ in range(repeat):
        start = time.perf_counter()
        reply = viewer.handle(ViewRequest.parse("GET", target, {}))
        best = min(best, time.perf_counter() - start)
        size, status = len(reply.body), reply.status
    return best, size, status


def in_browser(db: Path, pages: dict[str, str], repeat: int) -> float:
    """Each page loaded in headless Chromium from `curator audit serve`: navigation start to
    the load event (HTML parsed, styles applied, script run), best of `repeat`."""
    import subprocess
    import sys

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    command = [sys.executable, "-m", "proxy.cli", "audit", "serve", "--path", str(db),
               "--port", "0"]  # fmt: skip
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    slowest = 0.0
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as server:
        assert server.stdout is not None
        base = server.stdout.readline().split(": ", 1)[1].split()[0].removesuffix("/requests")
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        try:
            for name, target in pages.items():
                best = float("inf")
                for _ in range(repeat):
                    driver.get(base + target)
                    best = min(best, driver.execute_script(
                        "const t = performance.getEntriesByType('navigation')[0];"
                        "return (t.loadEventEnd - t.startTime) / 1000;"))  # fmt: skip
                slowest = max(slowest, best)
                print(f"{name:<13} browser {best * 1000:8.1f} ms")
        finally:
            driver.quit()
            server.terminate()
    return slowest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=160_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--browser", action="store_true", help="also load each page in headless Chromium"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "audit.db"
        rid = fill(db, args.tokens)
        viewer = Viewer(opener(str(db)), AdminKeys(()))
        record = opener(str(db))().get(rid)
        assert record is not None
        print(f"request: {record['tokens_before']:,} -> {record['tokens_after']:,} tokens, "
              f"{len(record['original'])} -> {len(record['curated'])} messages, "
              f"{len(record['actions'])} actions")  # fmt: skip
        pages = {
            "request": f"/requests/{rid}",
            "raw json": f"/requests/{rid}.json",
            "requests": "/requests",
            "search": "/requests?q=def+main",
            "conversation": f"/conversations/{record_conversation(record)}",
            "overview": "/overview?since=3650d",
        }
        slowest = 0.0
        for name, target in pages.items():
            best, size, status = timed(viewer, target, args.repeat)
            slowest = max(slowest, best)
            print(f"{name:<13} {status}  {best * 1000:8.1f} ms  {size / 1024:8.0f} KiB")
        if args.browser:
            slowest = max(slowest, in_browser(db, pages, args.repeat))
    verdict = "under" if slowest < GOAL_S else "OVER"
    print(f"slowest page {slowest * 1000:.0f} ms: {verdict} the {GOAL_S:.0f} s goal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
