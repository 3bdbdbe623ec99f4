import json

import numpy as np

from ._signing import resigned
import pytest

from structcal import io
from structcal.exceptions import ParameterError


@io.register(format_version=3)
class _Toy:
    def __init__(self, alpha=1.0):
        self.alpha = alpha

    def _to_state(self):
        return {"alpha": self.alpha}, {"w": self.w_}

    @classmethod
    def _from_state(cls, params, arrays):
        m = cls(**params)
        m.w_ = arrays["w"]
        return m


def test_round_trip_and_manifest(tmp_path):
    m = _Toy(alpha=0.5)
    m.w_ = np.arange(6.0).reshape(2, 3)
    npz, js = io.save(m, tmp_path / "toy", metadata={"accuracy": np.float64(0.9)})
    assert npz.name == "toy.npz" and js.name == "toy.json"
    for p in (tmp_path / "toy", npz, js):
        back = io.load(p)
        np.testing.assert_array_equal(back.w_, m.w_)
        assert back.alpha == 0.5 and back.metadata_ == {"accuracy": 0.9}
    manifest = io.read_manifest(tmp_path / "toy")
    assert manifest["class"] == "_Toy" and manifest["format_version"] == 3


def test_bad_files(tmp_path):
    with pytest.raises(ParameterError, match="manifest is missing"):
        io.load(tmp_path / "nothing")
    (tmp_path / "junk.json").write_text("not json")
    with pytest.raises(ParameterError, match="not a structcal model manifest"):
        io.load(tmp_path / "junk")
    (tmp_path / "other.json").write_text(json.dumps({"format": "something"}))
    with pytest.raises(ParameterError, match="not a structcal model manifest"):
        io.load(tmp_path / "other")
    m = _Toy()
    m.w_ = np.zeros(2)
    io.save(m, tmp_path / "toy")
    manifest = json.loads((tmp_path / "toy.json").read_text())
    manifest["format_version"] = 99
    (tmp_path / "toy.json").write_text(json.dumps(resigned(manifest)))
    with pytest.raises(ParameterError, match="format_version 99"):
        io.load(tmp_path / "toy")
    manifest["format_version"], manifest["class"] = 3, "os.system"
    (tmp_path / "toy.json").write_text(json.dumps(resigned(manifest)))
    with pytest.raises(ParameterError, match="unknown model class"):
        io.load(tmp_path / "toy")


def test_failed_save_leaves_nothing(tmp_path):
    class Broken(_Toy):
        def _to_state(self):
            return {"alpha": 1.0}, {"w": np.array([object()], dtype=object)}

    io.register(1)(Broken)
    with pytest.raises(Exception):
        io.save(Broken(), tmp_path / "b")
    assert list(tmp_path.iterdir()) == []


def test_unregistered_class_cannot_be_saved(tmp_path):
    with pytest.raises(TypeError, match="not a registered structcal model"):
        io.save(object(), tmp_path / "x")


def test_dumps_is_the_saved_form_as_bytes(tmp_path):
    import zipfile
    from io import BytesIO

    m = _Toy(alpha=0.25)
    m.w_ = np.arange(4.0)
    blob = io.dumps(m, metadata={"n": 3})
    back = io.loads(blob)
    np.testing.assert_array_equal(back.w_, m.w_)
    assert back.alpha == 0.25 and back.metadata_ == {"n": 3}
    with pytest.raises(ParameterError, match="holds a _Toy, not a"):
        io.loads(blob, expected_class=dict)
    # the two files save() writes (npz archives carry their write time, hence the checksum)
    io.save(m, tmp_path / "toy", metadata={"n": 3})
    with zipfile.ZipFile(BytesIO(blob)) as zf:
        with np.load(BytesIO(zf.read("model.npz")), allow_pickle=False) as a, \
                np.load(tmp_path / "toy.npz", allow_pickle=False) as b:
            assert a.files == b.files and all(np.array_equal(a[k], b[k]) for k in a.files)
        manifest = json.loads(zf.read("model.json"))
    on_disk = json.loads((tmp_path / "toy.json").read_text())
    assert {**manifest, "arrays_sha256": None} == {**on_disk, "arrays_sha256": None}

    def rezip(manifest, npz):
        out = BytesIO()
        with zipfile.ZipFile(out, "w") as zf:
            zf.writestr("model.json", json.dumps(resigned(manifest)))
            zf.writestr("model.npz", npz)
        return out.getvalue()

    with zipfile.ZipFile(BytesIO(blob)) as zf:
        npz = zf.read("model.npz")
    assert io.loads(rezip(manifest, npz)).alpha == 0.25
    with pytest.raises(ParameterError, match=r"'<bytes>' has format_version 99"):
        io.loads(rezip({**manifest, "format_version": 99}, npz))
    with pytest.raises(ParameterError, match="SHA-256 differs"):
        io.loads(rezip(manifest, npz[:-1] + b"x"))
    with pytest.raises(ParameterError, match="not a structcal model archive"):
        io.loads(b"not a zip")
    with pytest.raises(TypeError, match="must be bytes"):
        io.loads("model.json")
