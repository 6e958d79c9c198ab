"""Locations inside the repository (conf/ and checkpoints/ sit beside the `tts` package)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONF_DIR = REPO_ROOT / "conf"
CHECKPOINT_DIR = REPO_ROOT / "checkpoints"
