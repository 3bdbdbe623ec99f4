"""Build the GUM subset shipped in ``structcal/datasets/data/`` from the GUM NER package.

Keeps the documents whose text licence the GUM repository itself states
(``licence_basis == "GUM_LICENSE.txt"`` in ``documents.tsv``: 108 documents of 6 genres,
GUM's official train/dev/test split), with both BIO columns, and writes:

- ``gum.npz``: the tokens, tags and per-document metadata (pickle-free);
- ``GUM_documents.txt``: the ``documents.tsv`` rows of those documents (author, title,
  source URL: the attribution each licence requires);
- ``GUM_LICENSE`` (the package's notice, for the subset), ``GUM_LICENSE_GUM.txt`` (GUM's
  own LICENSE.txt, verbatim) and the legal codes of the licences involved.

Usage::

    python benchmarks/data_build/build_gum_subset.py [GUM_PACKAGE_DIR] [OUT_DIR]

(defaults: ``../shared/data/gum`` and ``structcal/datasets/data``). Deterministic: the
same input gives byte-identical files.
"""

import argparse
import io
import shutil
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", default=str(ROOT.parent / "shared" / "data" / "gum"))
    ap.add_argument("out", nargs="?", default=str(ROOT / "structcal" / "datasets" / "data"))
    args = ap.parse_args()
    src, out = Path(args.src), Path(args.out)
    z = np.load(src / "gum_ner.npz", allow_pickle=False)
    basis = z["doc_licence_basis"]
    keep_doc = np.flatnonzero(basis == "GUM_LICENSE.txt")
    remap = np.full(basis.shape[0], -1)
    remap[keep_doc] = np.arange(keep_doc.shape[0])
    sent_doc = z["sentence_doc"].astype(np.int64)
    keep_sent = np.flatnonzero(remap[sent_doc] >= 0)
    so, to = z["sentence_offsets"], z["token_offsets"]
    buf = z["tokens_utf8"].tobytes()
    tokens, tags, named, offsets = [], [], [], [0]
    for j in keep_sent.tolist():
        a, b = int(so[j]), int(so[j + 1])
        tokens += [buf[to[i]:to[i + 1]] for i in range(a, b)]
        tags.append(z["tags"][a:b])
        named.append(z["tags_named"][a:b])
        offsets.append(offsets[-1] + b - a)
    lens = np.array([len(t) for t in tokens], dtype=np.int64)
    arrays = {
        "tokens_utf8": np.frombuffer(b"".join(tokens), dtype=np.uint8),
        "token_offsets": np.concatenate([[0], np.cumsum(lens)]).astype(np.int64),
        "tags": np.concatenate(tags).astype(np.int8),
        "tags_named": np.concatenate(named).astype(np.int8),
        "tag_names": z["tag_names"],
        "entity_types": z["entity_types"],
        "sentence_offsets": np.asarray(offsets, dtype=np.int64),
        "sentence_doc": remap[sent_doc[keep_sent]].astype(np.int16),
        "sentence_idx": z["sentence_idx"][keep_sent],
        "doc_ids": z["doc_ids"][keep_doc],
        "doc_genre": z["doc_genre"][keep_doc],
        "doc_split": z["doc_split"][keep_doc],
        "doc_licence": z["doc_licence"][keep_doc],
        "split_names": z["split_names"],
        "source_commit": z["source_commit"],
    }
    # deterministic archive (no timestamps)
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, member.getvalue())
    (out / "gum.npz").write_bytes(data.getvalue())
    kept = set(str(d) for d in z["doc_ids"][keep_doc])
    lines = (src / "documents.tsv").read_text(encoding="utf-8").splitlines()
    rows = [lines[0]] + [ln for ln in lines[1:] if ln.split("\t")[0] in kept]
    (out / "GUM_documents.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    shutil.copy(src / "LICENSE_GUM.txt", out / "GUM_LICENSE_GUM.txt")
    for lic in sorted({str(x) for x in z["doc_licence"][keep_doc]}):
        shutil.copy(src / "licenses" / f"{lic}.txt", out / f"GUM_{lic}.txt")
    n_tok = int(arrays["token_offsets"].shape[0] - 1)
    print(f"kept {keep_doc.shape[0]} documents, {keep_sent.shape[0]} sentences, {n_tok} tokens; "
          f"genres {sorted(set(arrays['doc_genre'].tolist()))}")


if __name__ == "__main__":
    main()
