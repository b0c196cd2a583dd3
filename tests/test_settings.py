"""The `dice.*` schema: camelCase or snake_case keys, validation, model-affecting changes."""

from __future__ import annotations

from pathlib import Path

from dice_lsp.settings import Settings


def test_camel_case_nested_or_flat_settings_are_read() -> None:
    flat, errors = Settings().updated({"maxCanvas": 32, "blockLength": 8, "trustRemoteCode": True})
    nested, _ = Settings().updated({"dice": {"max_canvas": 32, "block_length": 8, "trust_remote_code": True}})
    assert errors == [] and flat == nested
    assert flat.max_canvas == 32 and flat.block_length == 8 and flat.trust_remote_code


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
