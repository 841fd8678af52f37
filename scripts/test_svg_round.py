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
        self.assertEqual(sr.compact(d), 'd="M1 2V3H4.5L5 6"')

    def test_other_paths_untouched_but_rounded(self):
        d = 'd="M 0 0 Q 1.2345 2 3 4 z"'
        self.assertEqual(sr.compact(d), 'd="M 0 0 Q 1.23 2 3 4 z"')

    def test_undrawn_parts_dropped(self):
        svg = ('<svg>\n <metadata>\n  <rdf:RDF/>\n </metadata>\n <g>\n  <!-- $0$ -->\n'
               '  <path d="M 0 1 \nL 0 2 \nz\n"/>\n </g>\n</svg>')
        self.assertEqual(sr.compact(svg), '<svg>\n<path d="M0 1V2z"/>\n</svg>')

    def test_a_rotation_by_zero_goes_a_real_one_stays(self):
        svg = ('<text x="150.6" y="150" transform="rotate(-0 150.599993 150.017344)">a</text>'
               '<text x="1" y="2" transform="rotate(-90 1 2)">b</text>')
        out = sr.compact(svg)
        self.assertIn('<text x="150.6" y="150">a</text>', out)
        self.assertIn('transform="rotate(-90 1 2)"', out)

    def test_groups_with_only_an_id_go_their_children_stay(self):
        svg = ('<g id="figure_1">\n<g transform="translate(1 2)">\n<g>\n<text>a</text>\n</g>\n</g>\n'
               '<g id="x" style="fill: red">\n<path d="M0 0"/>\n</g>\n</g>')
        self.assertEqual(sr.compact(svg), '<g transform="translate(1 2)">\n<text>a</text>\n</g>\n'
                         '<g id="x" style="fill: red">\n<path d="M0 0"/>\n</g>\n')

    def test_shared_styles_become_classes(self):
        svg = ('<style type="text/css">*{stroke: none}</style>'
               '<path style="fill: none; stroke: #000"/><use style="fill: none; stroke: #000"/>'
               '<text style="font-size: 7px"/>')
        out = sr.compact(svg)
        self.assertEqual(out, '<style type="text/css">*{stroke: none}\n.s0{fill: none; stroke: #000}</style>'
                         '<path class="s0"/><use class="s0"/><text style="font-size: 7px"/>')
        self.assertEqual(sr.compact(out), out)

    def test_tight_paths_read_again(self):
        self.assertEqual(sr.compact('d="M1.004 2V3.004H4.5"', 1), 'd="M1 2V3H4.5"')

    def test_idempotent(self):
        d = 'd="M 1.0 2.0 L 1.0 3.004 L 4.5 3.004"'
        self.assertEqual(sr.compact(sr.compact(d)), sr.compact(d))


if __name__ == "__main__":
    unittest.main()
