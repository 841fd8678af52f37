"""Writes a document for the browser to render: text, tables and SVG."""
import sys

parts = ["<!doctype html><html><head><meta charset='utf-8'><title>report</title></head><body>"]
for s in range(200):
    parts.append(f"<h2>Section {s}</h2><p>" + "Lorem ipsum dolor sit amet. " * 40 + "</p>")
    parts.append("<table border=1>" + "".join(
        f"<tr>{''.join(f'<td>{s * r * c}</td>' for c in range(8))}</tr>" for r in range(10)) + "</table>")
    parts.append(f"<svg width='200' height='60'><rect width='{s % 200}' height='60' fill='teal'/></svg>")
parts.append("</body></html>")
open(sys.argv[1], "w").write("\n".join(parts))
