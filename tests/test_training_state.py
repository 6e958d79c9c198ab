"""What training writes and shares: the token cache under concurrent writers, the optimizer state in checkpoints."""

import io
from pathlib import Path

import torch
from hydra.utils import instantiate

from test_train_recipe import config
from tts.data.dataset import TTSDataset


def test_token_cache_temp_file_is_per_process(featurised_corpus: Path, tmp_path: Path):
    # Another rank writing the same split holds the shared temp name (here: something that cannot be
    # written over); this process writes its own temp file, renames it into place, and leaves none behind.
    cfg = config([f"data.root={featurised_corpus}"])
    frontend, mel_config = instantiate(cfg.text), instantiate(cfg.audio)
    probe = TTSDataset.__new__(TTSDataset)
    probe.root, probe.split = featurised_corpus, "val"
    cache = probe._cache_path(frontend)
    cache.unlink(missing_ok=True)
    cache.with_suffix(".tmp").mkdir(parents=True)
    try:
        ds = TTSDataset(featurised_corpus, "val", frontend, mel_config)
    finally:
        cache.with_suffix(".tmp").rmdir()
    assert cache.is_file() and len(ds) == 2
    assert not [p for p in cache.parent.iterdir() if ".tmp" in p.name]


def test_optimizer_state_holds_plain_values(tmp_path: Path):
    # conf/optim/adam.yaml: betas must reach the optimizer as a list, not an OmegaConf ListConfig, or a
    # checkpoint pickles OmegaConf objects (whether the optimizer copies them into a tuple is torch's affair)
    cfg = config([])
    factory = instantiate(cfg.optim.optimizer)
    assert type(factory.keywords["betas"]) is list
    opt = factory(params=[torch.nn.Parameter(torch.zeros(2))])
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert list(state["param_groups"][0]["betas"]) == [0.9, 0.999]
