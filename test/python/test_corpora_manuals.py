# test_corpora_manuals.py: scripts/data/manual_pairs.py on manual pages written here (no network),
# the handbook's Publican layout, the Installation Guide's DocBook <p> and the Reference's suffixed files: headings and paragraphs pair by order with section numbers cut, inline markup flattened
# and program listings left out; a page whose blocks differ from the English page's is left out
# whole in that language (a control: the same page aligned is paired); untranslated paragraphs are
# dropped; the sections corpus pairs each English title with its paragraphs, a sidebar's category
# cut from its title; a page keeps one split in both corpora, with no text across splits (a planted
# leak caught); held-out English of other corpora stays out of train.

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "data"))
sys.path.insert(0, str(ROOT / "test" / "python"))
import manual_pairs  # noqa: E402
from test_corpora import (SPLITS, check_manifest, pair_keys, planted_leak_caught, read_splits, seeded_splits_hold,  # noqa: E402
                          translation_pairs)

LONG = "Every package of the archive is built from a source package, and the tools described here keep them apart."


def html(blocks, docbook=False):
    """A Publican-style page (docbook: DocBook XSL's, paragraphs as <p>): ("h2", text) headings with numbers,
    ("p", text) paragraphs, ("side", category, title) sidebar titles, ("pre", text) listings."""
    body = []
    for block in blocks:
        if block[0] == "p" and docbook:
            body.append(f'<p>\n\n{block[1]}\n\n</p>')
        elif block[0] == "p":
            body.append(f'<div class="para">\n\t\t\t\t{block[1]}\n\t\t\t</div>')
        elif block[0] == "pre":
            body.append(f'<pre class="screen">{block[1]}</pre>')
        elif block[0] == "side":
            body.append(f'<div class="sidebar"><div class="titlepage"><div><div><p class="title"><strong><span class="emphasis">'
                        f'<em>{block[1]}</em></span> {block[2]}</strong></p></div></div></div>')
        else:
            body.append(f'<div class="titlepage"><h2 class="title"><a id="x"></a>{block[1]}</h2></div>')
    return ('<html><head><title>x</title></head><body><div id="banner"><span class="text">Download the ebook</span></div>'
            f'<div class="section">{"".join(body)}</div></body></html>')


ENGLISH = {
    "sect.apt": [("h2", "6.2. The <code>apt</code> Command"), ("p", f"Use <code>apt install</code> to install a package. {LONG}"),
                 ("pre", "# apt install foo"), ("p", "It resolves dependencies for you.")],
    "sect.selinux": [("h2", "14.5. SELinux"), ("p", f"SELinux applies mandatory access control. {LONG}"),
                     ("side", "DOCUMENTATION", "Explanations about the <em>reference policy</em>"),
                     ("p", f"The reference policy evolves like any free software project. {LONG}")],
    "sect.network": [("h2", "B.4.5. Network Configuration"), ("p", f"Interfaces are configured in one file. {LONG}")],
}
FRENCH = {
    "sect.apt": [("h2", "6.2. La commande <code>apt</code>"), ("p", f"Utilisez <code>apt install</code> pour installer un paquet. "
                                                                   "Chaque paquet est construit à partir d'un paquet source."),
                 ("pre", "# apt install foo"), ("p", "It resolves dependencies for you.")],  # left untranslated
    "sect.selinux": [("h2", "14.5. SELinux et sécurité"), ("p", "SELinux applique un contrôle d'accès obligatoire."),
                     ("side", "DOCUMENTATION", "Explications sur la <em>politique de référence</em>"),
                     ("p", "La politique de référence évolue comme tout projet libre.")],
    "sect.network": [("h2", "B.4.5. Configuration du réseau"), ("p", "Les interfaces sont configurées dans un fichier.")],
}


INSTALL_EN = [("h2", "2.1. Supported Hardware"), ("p", f"Debian does not impose hardware requirements. {LONG}")]
INSTALL_FR = [("h2", "2.1. Matériel reconnu"), ("p", "Debian n'impose pas d'exigences matérielles.")]
REFERENCE_EN = [("h2", "Chapter 7. The X Window System"), ("p", f"The X Window System draws the desktop. {LONG}")]
REFERENCE_FR = [("h2", "Chapitre 7. Le système X Window"), ("p", "Le système X Window dessine le bureau.")]


def sphinx(title, paragraph, sidebar):
    """A Sphinx page: navigation before the main body, a heading with its pilcrow link, a sidebar after."""
    return (f'<html><body><div class="related"><h3>{sidebar}</h3></div><div class="body" role="main"><section>'
            f'<h1><span class="section-number">2.1. </span>{title}<a class="headerlink" href="#x">\u00b6</a></h1>'
            f'<p>{paragraph}</p></section></div><div class="sphinxsidebar"><h3>{sidebar}</h3><p>{sidebar}</p></div></body></html>')


GUIDE_EN = [("h2", "Chapter 1. Getting started The Right Way"), ("p", f"This document describes building a Debian package. {LONG}")]
GUIDE_FR = [("h2", "Chapitre 1. Partir du bon pied"), ("p", "Ce document décrit la construction d'un paquet Debian.")]
FAQ_EN = [("h2", "1.1. What is Debian?"), ("p", f"Debian is a free operating system. {LONG}")]
FAQ_FR = [("h2", "1.1. Qu'est-ce que Debian ?"), ("p", "Debian est un système d'exploitation libre.")]


def write_book(root, misaligned=True):
    """The six books' layouts under root: the handbook's locale folders, the Installation Guide's (DocBook <p>,
    English in en/, French also as fr_CA), the Reference's page.locale.html files, the Maintainers' Guide's
    folder a package, the FAQ's translations in a folder below the English, the Developer's Reference's Sphinx pages."""
    base = root / manual_pairs.BOOKS["handbook"][1]
    for locale, pages in (("en-US", ENGLISH), ("fr-FR", FRENCH), ("ja-JP", FRENCH)):
        folder = base / locale
        folder.mkdir(parents=True, exist_ok=True)
        for name, blocks in pages.items():
            if misaligned and locale != "en-US" and name == "sect.network":
                blocks = blocks + [("p", "Seulement en français.")]
            (folder / f"{name}.html").write_text(html(blocks), encoding="utf-8")
    guide = root / manual_pairs.BOOKS["installation-guide"][1]
    for locale, blocks in (("en", INSTALL_EN), ("fr", INSTALL_FR), ("fr_CA", [(k, t + " (CA)") for k, t in INSTALL_FR])):
        (guide / locale).mkdir(parents=True, exist_ok=True)
        (guide / locale / "ch02s01.html").write_text(html(blocks, docbook=True), encoding="utf-8")
    reference = root / manual_pairs.BOOKS["reference"][1]
    reference.mkdir(parents=True, exist_ok=True)
    for locale, blocks in (("en", REFERENCE_EN), ("fr", REFERENCE_FR)):
        (reference / f"ch07.{locale}.html").write_text(html(blocks, docbook=True), encoding="utf-8")
    for folder, locale, blocks in (("maint-guide", "en", GUIDE_EN), ("maint-guide-fr", "fr", GUIDE_FR)):  # a package a language
        (root / "usr/share/doc" / folder / "html").mkdir(parents=True, exist_ok=True)
        (root / "usr/share/doc" / folder / "html" / f"first.{locale}.html").write_text(html(blocks, docbook=True), encoding="utf-8")
    faq = root / "usr/share/doc/debian/FAQ"
    (faq / "fr").mkdir(parents=True, exist_ok=True)
    for path, blocks in ((faq / "basic-defs.html", FAQ_EN), (faq / "basic-defs.en.html", FAQ_EN), (faq / "fr" / "basic-defs.fr.html", FAQ_FR)):
        path.write_text(html(blocks, docbook=True), encoding="utf-8")  # the English twice, as the package has it
    developers = root / "usr/share/developers-reference"
    (developers / "fr").mkdir(parents=True, exist_ok=True)
    (developers / "new-maintainer.html").write_text(sphinx("Getting started", f"So, you have read the documentation. {LONG}",
                                                           "Navigation"), encoding="utf-8")
    (developers / "fr" / "new-maintainer.html").write_text(sphinx("Pour commencer", "Vous avez lu la documentation.",
                                                                  "Navigation rapide et recherche"), encoding="utf-8")
    return root


def run(tmp_path, output, root, held="", seed=0, test_fraction=0.0):
    manual_pairs.main(["--manuals-root", str(root), "--languages", "fr,ja", "--output", str(output), "--sections-output",
                       str(output) + "-sections", "--held-out-text", held, "--seed", str(seed), "--dev-fraction", "0.0",
                       "--test-fraction", str(test_fraction)])
    return read_splits(output), read_splits(pathlib.Path(str(output) + "-sections"))


def test_pairs_by_order(tmp_path):
    translations, sections = run(tmp_path, tmp_path / "out", write_book(tmp_path / "book"))
    pairs = translation_pairs(translations)
    assert ("The apt Command", "La commande apt", "fr") in pairs and ("The apt Command", "La commande apt", "ja") in pairs
    assert any(english.startswith("Use apt install to install") and french.startswith("Utilisez apt install")
               for english, french, _ in pairs)
    assert ("Explanations about the reference policy", "Explications sur la politique de référence", "fr") in pairs
    assert not any("It resolves dependencies" in english for english, _, _ in pairs)  # untranslated
    assert not any("# apt install foo" in side for pair in pairs for side in pair[:2])  # the listing
    assert not any("Network" in english for english, _, _ in pairs)  # the misaligned page, whole
    manifest = check_manifest(tmp_path / "out")
    assert manifest["dropped_pairs"]["a page whose headings and paragraphs differ from the English page's"] == 2  # fr and ja
    assert manifest["locales"] == {"handbook": {"fr": "fr-FR", "ja": "ja-JP"}, "installation-guide": {"fr": "fr"},
                                   "reference": {"fr": "fr"}, "maint-guide": {"fr": "fr"}, "faq": {"fr": "fr"},
                                   "developers-reference": {"fr": "fr"}}
    # Sphinx: the main body only (the sidebar's own headings differ), the pilcrow and the number cut
    assert ("Getting started", "Pour commencer", "fr") in pairs and not any("Navigation" in pair[0] for pair in pairs)
    assert ("Getting started The Right Way", "Partir du bon pied", "fr") in pairs and ("What is Debian?", "Qu'est-ce que Debian ?", "fr") in pairs
    # the DocBook books: paragraphs as <p>, the chapter's word and number cut, a language's own locale preferred
    assert ("Supported Hardware", "Matériel reconnu", "fr") in pairs and not any("(CA)" in pair[1] for pair in pairs)
    assert ("Debian does not impose hardware requirements. " + LONG, "Debian n'impose pas d'exigences matérielles.", "fr") in pairs
    assert ("The X Window System", "Le système X Window", "fr") in pairs
    check_manifest(tmp_path / "out-sections")
    # the control: the same page aligned is paired, its appendix number cut
    aligned, _ = run(tmp_path, tmp_path / "aligned", write_book(tmp_path / "book2", misaligned=False))
    assert ("Network Configuration", "Configuration du réseau", "fr") in translation_pairs(aligned)


def test_sections_pair_titles_with_their_text(tmp_path):
    _, sections = run(tmp_path, tmp_path / "out", write_book(tmp_path / "book"))
    found = {(r["query"], r["positives"][0]) for split in SPLITS for r in sections[split]}
    assert all(r["lang"] == "en" for split in SPLITS for r in sections[split])
    assert (("The apt Command", f"Use apt install to install a package. {LONG}\n\nIt resolves dependencies for you.") in found)
    assert ("Explanations about the reference policy", f"The reference policy evolves like any free software project. {LONG}") in found
    assert ("SELinux", f"SELinux applies mandatory access control. {LONG}") in found
    assert ("Supported Hardware", f"Debian does not impose hardware requirements. {LONG}") in found
    assert ("The X Window System", f"The X Window System draws the desktop. {LONG}") in found
    assert not any(title.startswith("DOCUMENTATION") for title, _ in found)


def test_pages_whole_and_no_text_across_splits(tmp_path):
    root = write_book(tmp_path / "book", misaligned=False)
    seeded_splits_hold(lambda seed: list(run(tmp_path, tmp_path / f"out{seed}", root, seed=seed, test_fraction=0.4)))  # both corpora
    assert planted_leak_caught(tmp_path / "out0", pair_keys)  # the control


def test_held_out_english_stays_out_of_train(tmp_path):
    held = tmp_path / "gettext"
    held.mkdir()
    (held / "test.jsonl").write_text(json.dumps({"query": "selinux", "positives": ["SELinux"]}) + "\n")
    translations, _ = run(tmp_path, tmp_path / "out", write_book(tmp_path / "book"), held=str(held))
    pairs = translation_pairs(translations)
    assert not any(english == "SELinux" for english, _, _ in pairs)
    assert ("The apt Command", "La commande apt", "fr") in pairs
