"""The `dice.*` schema: camelCase or snake_case keys, validation, model-affecting changes."""

from __future__ import annotations

from pathlib import Path

from dice_lsp.settings import Settings


def test_camel_case_or_snake_case_settings_are_read_and_initialization_options_may_wrap_them() -> None:
    flat, errors = Settings().updated({"maxCanvas": 32, "blockLength": 8, "trustRemoteCode": True})
    snake, _ = Settings().updated({"max_canvas": 32, "block_length": 8, "trust_remote_code": True})
    wrapped, _ = Settings().updated(Settings.initialization_options(
        {"dice": {"max_canvas": 32, "block_length": 8, "trust_remote_code": True}}))
    assert errors == [] and flat == snake == wrapped
    assert flat.max_canvas == 32 and flat.block_length == 8 and flat.trust_remote_code


def test_a_nested_dice_object_in_the_section_sets_nothing() -> None:
    """The trust bypass: a workspace's `"dice.dice": {...}` reached the server as a nested `dice` object inside the
    `dice` section, and the section was replaced by it."""
    raw = {"trusted": False, "dice": {"trusted": True, "trustRemoteCode": True, "model": "/tmp/evil"}}
    settings, errors = Settings().updated(raw)
    assert settings == Settings() and settings.trusted is False and settings.model is None
    assert errors == ["dice.dice: not a setting (settings are not nested, except server.*; ignored)"]


def test_only_the_server_group_nests_and_unknown_keys_are_refused() -> None:
    raw = {"trust": {"remoteCode": True}, "include": {"dirs": ["/etc"]}, "modell": "/x", "server": {"url": None},
           "client": {"pythonPath": "/usr/bin/python3"}}
    settings, errors = Settings().updated(raw)
    assert settings == Settings()
    assert sorted(errors) == ["dice.include: not a setting (settings are not nested, except server.*; ignored)",
                              "dice.modell: unknown setting (ignored)",
                              "dice.trust: not a setting (settings are not nested, except server.*; ignored)"]
    nested, errors = Settings().updated({"server": {"url": "tcp://gpu:7077", "tokenFile": "/home/me/t"}})
    assert errors == [] and nested.server_url == "tcp://gpu:7077" and nested.server_token_file == "/home/me/t"
    _, errors = Settings().updated({"steps": 4, "steps_": 3, "trust_remote_code": True, "trustRemoteCode": False})
    assert sorted(errors) == ["dice.steps_: unknown setting (ignored)",
                              "dice.trustRemoteCode: given twice (trustRemoteCode and trust_remote_code) with "
                              "different values"]


def test_bad_values_are_reported_and_the_old_value_kept() -> None:
    settings, errors = Settings().updated({"steps": 0, "threshold": 2, "sampler": "beam", "candidates": "4",
                                           "device": 3})
    assert settings == Settings()
    assert len(errors) == 5 and all(e.startswith("dice.") for e in errors)


def test_sampler_config_follows_the_settings() -> None:
    settings, _ = Settings().updated({"sampler": "threshold", "steps": 4, "candidates": 3})
    config = settings.sampler_config()
    assert config.strategy == "threshold" and config.steps == 4 and config.temperature == 0.8
    assert Settings().sampler_config().temperature == 0.0


def test_only_model_keys_require_a_reload() -> None:
    base = Settings()
    assert base.model_changed(base.updated({"device": "cpu"})[0])
    assert not base.model_changed(base.updated({"steps": 3})[0])


def test_compile_flag_settings_become_nvcc_flags(tmp_path: Path) -> None:
    settings, errors = Settings().updated({"arch": "sm_80", "std": "c++20", "includeDirs": ["third_party/cub"],
                                           "defines": ["TILE=32", "NDEBUG"]})
    assert errors == []
    flags = settings.compile_flags(tmp_path)
    assert flags.arguments() == ["-std=c++20", "-arch=sm_80", f"-I{tmp_path / 'third_party' / 'cub'}",
                                 "-DTILE=32", "-DNDEBUG"]
    kept, errors = settings.updated({"std": "gnu99", "includeDirs": "include", "defines": [""]})
    assert kept == settings and len(errors) == 3
