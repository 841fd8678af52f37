"""Generates the inputs of the office and JVM apps (deterministic).

    python make_data.py office DIR   # DIR/report.fodt: a 40-page text document with tables
    python make_data.py jvm DIR      # DIR/sales.csv: 200,000 rows of sales
"""
import os
import random
import sys
from xml.sax.saxutils import escape


def office(d):
    rnd = random.Random(1)
    words = ("launch memory scheduler page cache reclaim flash storage profile "
             "device model background process latency kernel").split()
    body = []
    for s in range(60):
        body.append(f'<text:h text:outline-level="1">Section {s + 1}</text:h>')
        for _ in range(6):
            text = " ".join(rnd.choice(words) for _ in range(90))
            body.append(f"<text:p>{escape(text.capitalize())}.</text:p>")
        rows = "".join(
            "<table:table-row>" + "".join(
                f'<table:table-cell office:value-type="string"><text:p>{s * r * c}</text:p>'
                "</table:table-cell>" for c in range(6)) + "</table:table-row>"
            for r in range(8))
        body.append(f'<table:table table:name="T{s}"><table:table-column '
                    f'table:number-columns-repeated="6"/>{rows}</table:table>')
    doc = ('<?xml version="1.0" encoding="UTF-8"?>\n'
           '<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
           'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
           'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
           'office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.text">'
           "<office:body><office:text>" + "".join(body) +
           "</office:text></office:body></office:document>\n")
    with open(os.path.join(d, "report.fodt"), "w") as f:
        f.write(doc)


def jvm(d):
    rnd = random.Random(2)
    regions = ["north", "south", "east", "west", "centre", "coast", "hills", "lakes"]
    with open(os.path.join(d, "sales.csv"), "w") as f:
        f.write("id,region,product,amount,day\n")
        for i in range(200_000):
            f.write(f"{i},{rnd.choice(regions)},p{rnd.randrange(500)},"
                    f"{rnd.uniform(0, 200):.2f},{rnd.randrange(365)}\n")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("office", "jvm"):
        raise SystemExit("usage: make_data.py office|jvm DIR")
    os.makedirs(sys.argv[2], exist_ok=True)
    {"office": office, "jvm": jvm}[sys.argv[1]](sys.argv[2])
