"""Which id joins a Responses call to its output."""

from __future__ import annotations

from proxy.protocols.responses.kinds import CALLS, OUTPUTS, call_id, output_id
from tests.fakes import responses_items as r


def test_calls_and_outputs_pair_by_call_id() -> None:
    assert call_id(r.function_call("c1")) == "c1"
    assert output_id(r.function_output("c1")) == "c1"
    assert call_id(r.shell_call("sh")) == output_id(r.shell_output("sh")) == "sh"


def test_an_approval_request_is_answered_by_its_own_id() -> None:
    request, response = r.approval_request(3), r.approval_response(3)
    assert call_id(request) == request["id"]
    assert output_id(response) == request["id"]


def test_a_missing_or_non_string_id_is_none() -> None:
    assert call_id({"type": "function_call", "call_id": 7}) is None
    assert output_id({"type": "function_call_output"}) is None


def test_every_call_kind_has_an_output_kind() -> None:
    assert {c.replace("_call", "") for c in CALLS if c.endswith("_call")} <= {
        o.replace("_call_output", "") for o in OUTPUTS
    }
    assert len(CALLS) == len(OUTPUTS)
