"""Shared fixtures: the 20-utterance Festival corpus committed under tests/fixtures/slt20."""

from pathlib import Path

import pytest
import torch

FIXTURE_CORPUS = Path(__file__).parent / "fixtures" / "slt20"


@pytest.fixture(scope="session", autouse=True)
def _few_threads():
    # Tests run on 2-core CI machines; intra-op threads beyond that only add contention.
    torch.set_num_threads(2)


@pytest.fixture(scope="session")
def fixture_corpus() -> Path:
    assert (FIXTURE_CORPUS / "metadata.csv").is_file(), f"fixture corpus missing at {FIXTURE_CORPUS}"
    return FIXTURE_CORPUS


@pytest.fixture(scope="session")
def real_wav(fixture_corpus: Path) -> Path:
    return sorted((fixture_corpus / "wavs").glob("*.wav"))[0]


@pytest.fixture(scope="session")
def featurised_corpus(tmp_path_factory, fixture_corpus: Path) -> Path:
    """A copy of the fixture corpus with features extracted (the committed fixture holds none)."""
    import shutil

    from data_prep.features import extract_features

    root = tmp_path_factory.mktemp("corpus") / "slt20"
    shutil.copytree(fixture_corpus, root)
    extract_features(root, jobs=1)
    return root


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread in this process (servers and CLI subprocesses of these tests run with one too): on a
    loaded 2-core machine two threads per process oversubscribe the cores and run several times slower, and
    a server's audio compared with this process's is rounded alike. Use with
    `pytestmark = pytest.mark.usefixtures("one_torch_thread")`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def voice():
    """The shipped default voice through the Python API on the torch engine (tts.load(runtime="torch"): "auto",
    the default, would take its ONNX export when that is current), loaded once for the session."""
    import tts

    return tts.load(runtime="torch")
