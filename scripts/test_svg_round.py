#!/usr/bin/env python3
"""Tests of scripts/svg-round (run by scripts/test)."""
import importlib.machinery
import importlib.util
import os
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
loader = importlib.machinery.SourceFileLoader("svg_round", os.path.join(HERE, "svg-round"))
sr = importlib.util.module_from_spec(importlib.util.spec_from_loader("svg_round", loader))
loader.exec_module(sr)


class SvgRound(unittest.TestCase):
    def test_coordinates_rounded_scales_kept(self):
        svg = ('<path id="DejaVuSans-31" d="M 794 531 L 1825 531 z" transform="scale(0.015625)"/>'
               '<g transform="translate(98.347676 258.101656) scale(0.1 -0.1)">'
               '<use x="101.528926" y="243.504" style="stroke: #000000; stroke-width: 0.8"/>')
        out = sr.compact(svg)
        self.assertIn('transform="scale(0.015625)"', out)
        self.assertIn('transform="translate(98.35 258.1) scale(0.1 -0.1)"', out)
        self.assertIn('x="101.53" y="243.5"', out)
        self.assertIn("stroke-width: 0.8", out)  # styles are not coordinates

    def test_axis_segments_as_h_and_v(self):
        d = 'd="M 1.0 2.0 L 1.0 3.004 L 4.5 3.004 L 5 6"'
        self.assertEqual(sr.compact(d), 'd="M 1 2 V 3 H 4.5 L 5 6"')

    def test_other_paths_untouched_but_rounded(self):
        d = 'd="M 0 0 Q 1.2345 2 3 4 z"'
        self.assertEqual(sr.compact(d), 'd="M 0 0 Q 1.23 2 3 4 z"')

    def test_undrawn_parts_dropped(self):
        svg = ('<svg>\n <metadata>\n  <rdf:RDF/>\n </metadata>\n <g>\n  <!-- $0$ -->\n'
               '  <path d="M 0 1 \nL 0 2 \nz\n"/>\n </g>\n</svg>')
        self.assertEqual(sr.compact(svg), '<svg>\n<g>\n<path d="M 0 1 V 2 z"/>\n</g>\n</svg>')

    def test_idempotent(self):
        d = 'd="M 1.0 2.0 L 1.0 3.004 L 4.5 3.004"'
        self.assertEqual(sr.compact(sr.compact(d)), sr.compact(d))


if __name__ == "__main__":
    unittest.main()
