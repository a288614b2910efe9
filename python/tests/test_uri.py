"""Array locations: local paths, ``file://`` and ``s3://`` URIs (S3 itself is tested in
test_s3.py); other ``scheme://`` URIs and malformed ``s3://`` ones are refused without creating
anything."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

import tessera as ts


def schema() -> ts.ArraySchema:
    return ts.ArraySchema(dims=[ts.Dim("r", (0, 3), 2)], attrs=[ts.Attr("a", "int32")])


@pytest.mark.parametrize(
    "uri",
    [
        "gs://bucket/a",
        "az://c/a",
        "http://host/a",
        "file://host/a",
        "file:///tmp/x%ff",
        "s3://Bad_Bucket/a",
        "s3://bucket/a//b",
        "s3://bucket/../b",
    ],
)
def test_unknown_schemes_are_refused_and_nothing_is_created(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, uri: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for call in (
        lambda: ts.create(uri, schema()),
        lambda: ts.from_numpy(uri, np.arange(4, dtype=np.int32)),
        lambda: ts.open(uri),
        lambda: ts.open(uri, "w"),
        lambda: ts.fragments(uri),
        lambda: ts.consolidate(uri),
        lambda: ts.vacuum(uri),
    ):
        with pytest.raises(ts.ArrayError) as e:
            call()
        assert uri in str(e.value)
    assert os.listdir(tmp_path) == []


def test_file_uris_name_local_paths(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "my dir" / "a"
    uri = "file://" + str(path).replace(" ", "%20")
    ts.create(uri, schema())
    assert (path / "__schema").is_dir()
    with ts.open(uri, "w") as A:
        A[0:4] = np.arange(4, dtype=np.int32)
    with ts.open(str(path)) as A:
        np.testing.assert_array_equal(A[0:4], np.arange(4, dtype=np.int32))
    assert len(ts.fragments("file://localhost" + str(path))) == 1
