"""The JUnit XML: schema-valid, one testcase per cell, properties and skip reasons readable."""

from __future__ import annotations

from pathlib import Path

import pytest
from lxml import etree

from harness import report
from harness.cells import Cell, Outcome, SkipReason, skipped

SCHEMA = etree.XMLSchema(
    etree.parse(str(Path(__file__).parent / "schemas" / "junit-properties.xsd"))
)
COMMON = {
    "target": "sm_90a",
    "device": "none",
    "cc": "none",
    "driver": "none",
    "toolkit": "13.0.88",
}


def _cells():
    return [
        Cell(
            "ch.k",
            "compile[sm_90a]",
            Outcome.PASSED,
            detail="nvcc ... <log> & more",
            seconds=1.5,
            properties={**COMMON, "registers": "40"},
        ),
        skipped("ch.k", "big[sm_90a]", SkipReason.NO_DEVICE, "no CUDA device visible", COMMON),
        Cell(
            "ch.k", "edge[sm_90a]", Outcome.FAILED, "y: 3 of 10 elements differ", properties=COMMON
        ),
        Cell("ch.bad", "spec[sm_90a]", Outcome.ERROR, "spec.py: import failed", properties=COMMON),
    ]


def test_xml_is_valid_and_keeps_every_cell(tmp_path):
    files = report.report_files(tmp_path, "junit-sm_90a")
    report.write(files, "cuda-matrix.sm_90a.test", {"target": "sm_90a"}, _cells())
    document = etree.parse(str(files.xml))
    SCHEMA.assertValid(document)
    suite = document.getroot()[0]
    assert (
        suite.get("tests"),
        suite.get("failures"),
        suite.get("errors"),
        suite.get("skipped"),
    ) == ("4", "1", "1", "1")
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("ch.k", "compile[sm_90a]"),
        ("ch.k", "big[sm_90a]"),
        ("ch.k", "edge[sm_90a]"),
        ("ch.bad", "spec[sm_90a]"),
    ]
    skip = cases[1].find("skipped")
    assert skip.get("type") == "no-device" and skip.get("message").startswith("no-device: ")
    props = {p.get("name"): p.get("value") for p in cases[0].find("properties")}
    assert props["registers"] == "40" and props["target"] == "sm_90a"
    assert cases[0].find("system-out").text == "nvcc ... <log> & more"


def test_the_schema_rejects_what_jenkins_would(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites><testsuite name="s"><testcase name="x"/></testsuite></testsuites>')
    with pytest.raises(etree.DocumentInvalid):
        SCHEMA.assertValid(etree.parse(str(bad)))  # tests/failures/errors are required
