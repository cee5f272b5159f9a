from __future__ import annotations

import dataclasses

import pytest

from policies.base import PinSpec
from policies.errors import ParamError
from policies.system import SystemPreservation
from tests.factories import assistant, ctx, developer, system, user


def test_defaults_pin_system_and_developer_messages() -> None:
    curator = SystemPreservation()
    assert curator.name == "system_preservation"
    assert curator.roles == ("system", "developer")
    assert curator.pin_spec() == PinSpec(frozenset({"system", "developer"}), first_user=False)


def test_yaml_lists_are_stored_as_tuples() -> None:
    curator = SystemPreservation(roles=["system"], pin_first_user=True)  # type: ignore[arg-type]
    assert curator.roles == ("system",)
    assert curator.pin_spec() == PinSpec(frozenset({"system"}), first_user=True)


def test_pin_spec_selects_roles_and_the_first_user_message() -> None:
    messages = [system(), user("first"), assistant(), developer(), user("second")]
    spec = SystemPreservation(pin_first_user=True).pin_spec()
    assert spec.pinned(messages) == frozenset({0, 1, 3})
    assert SystemPreservation(roles=("user",)).pin_spec().pinned(messages) == {1, 4}


def test_curate_passes_messages_through_because_pins_act_through_the_context() -> None:
    messages = [system(), user(), assistant()]
    out = SystemPreservation().curate(messages, ctx())
    assert out.messages == messages
    assert out.actions == ()


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"roles": []}, "roles", "must not be empty"),
        ({"roles": "system"}, "roles", "must be a list of strings, got 'system' (str)"),
        ({"roles": ["system", "admin"]}, "roles", "unknown value 'admin'"),
        ({"roles": ["system", 3]}, "roles", "items must be non-empty strings, got 3 (int)"),
        ({"roles": [""]}, "roles", "items must be non-empty strings"),
        ({"pin_first_user": "yes"}, "pin_first_user", "must be true or false, got 'yes' (str)"),
        ({"pin_first_user": 1}, "pin_first_user", "must be true or false, got 1 (int)"),
    ],
)
def test_invalid_parameters_name_the_field(
    kwargs: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(ParamError) as info:
        SystemPreservation(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field
    assert message in info.value.message


def test_curators_are_frozen() -> None:
    curator = SystemPreservation()
    with pytest.raises(dataclasses.FrozenInstanceError):
        curator.pin_first_user = True  # type: ignore[misc]
