"""Fails on a broken link in the book: a relative link to a page that does not exist, or to an
anchor its rendered page lacks. mdbook itself does not check links; run after `mdbook build docs`.
"""

import glob
import os
import re
import sys

os.chdir(os.path.dirname(os.path.abspath(__file__)))
broken = []
for page in glob.glob("src/**/*.md", recursive=True):
    text = re.sub(r"```.*?```", "", open(page).read(), flags=re.S)
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(target):
            broken.append(f"{page}: {link}: no such file")
        elif anchor and target.endswith(".md"):
            html = os.path.join("book", os.path.relpath(target, "src"))[:-3] + ".html"
            if f'id="{anchor}"' not in open(html).read():
                broken.append(f"{page}: {link}: no such anchor")
for b in broken:
    print(b, file=sys.stderr)
sys.exit(1 if broken else 0)
