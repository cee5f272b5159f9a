"""The `viewer:` section (viewer.py): on by default on the admin listener; public only with
admin keys."""

from __future__ import annotations

from pathlib import Path

from tests.proxy.config.configs import MINIMAL, assert_one_problem, load


def test_the_viewer_is_on_and_private_by_default(tmp_path: Path) -> None:
    config = load(tmp_path, MINIMAL)
    assert (config.viewer.enabled, config.viewer.public) == (True, False)


def test_public_needs_admin_keys(tmp_path: Path) -> None:
    text = MINIMAL + "viewer: {public: true}\n"
    assert_one_problem(tmp_path, text, "config.yaml:7: viewer.public: needs auth.admin_keys")
    keyed = text + "auth: {admin_keys: [adm-1]}\n"
    config = load(tmp_path, keyed)
    assert config.viewer.public


def test_unknown_keys_and_wrong_types_are_named(tmp_path: Path) -> None:
    assert_one_problem(tmp_path, MINIMAL + "viewer: {enable: true}\n", "config.yaml:7: viewer")
    assert_one_problem(
        tmp_path, MINIMAL + "viewer: {enabled: 'yes'}\n", "config.yaml:7: viewer.enabled"
    )
