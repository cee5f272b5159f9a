"""An overflow rescue's second curation (`proxy.curation.rescue`): the same request, curated
to a tightened budget, where the first curation ran: a big body in the curation thread,
never on the event loop (a 25 MB body curated again there held the loop for seconds)."""

from __future__ import annotations

import logging
from dataclasses import replace
from functools import partial
from time import perf_counter

from policies.calibration import BudgetHints
from policies.chain import CurationResult
from policies.summary_io import Services
from policies.tokens import TokenCounter
from proxy.curation.plan import OFFLOAD_BYTES, Pending, Plan, curated_plan, rebuilt_body
from proxy.curation.thread import CurationThread, in_thread

log = logging.getLogger("curator.rescue")


async def replan(
    request: Pending,
    counter: TokenCounter,
    hints: BudgetHints,
    services: Services | None,
    offload: CurationThread | None = None,
) -> Plan | None:
    """`request` curated again to `hints` (an overflow rescue, `proxy.curation.rescue`);
    None when that cannot help: the policy rejects or fails, or nothing more was cut. A big
    body is curated again where it was first (`OFFLOAD_BYTES`): in the curation thread."""
    before = request.record.tokens_after
    again = replace(request, hints=hints)
    started = perf_counter()
    try:
        policy, wire = again.choice.policy, again.wire
        if policy.is_async:
            result = await policy.acurate(
                wire.messages, wire.facts, counter, services=services, hints=hints
            )
            body = rebuilt_body(again, result)
        elif len(wire.raw) >= OFFLOAD_BYTES:
            job = partial(_curated_again, again, counter, hints)
            result, body = await (offload.run(job) if offload else in_thread(None, job))
        else:
            result, body = _curated_again(again, counter, hints)
    except Exception:  # ContextOverflow (on_overflow: reject) included: the error stands
        log.debug("rescue: curating again failed", exc_info=True)
        return None
    if not result.messages or (before is not None and result.tokens_after >= before):
        return None
    summary = services.stats if services is not None else None
    return curated_plan(again, result, body, started, summary)


def _curated_again(
    request: Pending, counter: TokenCounter, hints: BudgetHints
) -> tuple[CurationResult, bytes]:
    policy, wire = request.choice.policy, request.wire
    result = policy.curate(wire.messages, wire.facts, counter, hints=hints)
    return result, rebuilt_body(request, result)
