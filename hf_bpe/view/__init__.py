"""The token page: see how tokenizers cut text, live in the browser or as one saved HTML file.

``hf-bpe view TOKENIZER [TOKENIZER...]`` (:mod:`hf_bpe.cli._view`) serves the page with
:func:`~hf_bpe.view.make_server`; ``--html OUT`` writes :meth:`TokenPage.static_html`. The
page (``page.html`` beside this file, one self-contained file: inline CSS and JavaScript, no
network) asks the server for every tokenizer's tokens in one request per change of the text and
draws them; the static export embeds the same answer in the same page.

This package sits on top of the layers, beside the command line: it loads tokenizers of any format
and serves them. The token view object it draws (:mod:`hf_bpe._token_view`) sits at the model layer;
:func:`view_text` (``view_text(model, text)``) builds one, printed as bracketed tokens and shown in a
notebook as colored spans.
"""

from hf_bpe._token_view import TokenView, view_text
from hf_bpe.view._examples import DEFAULT_TEXT, EXAMPLES
from hf_bpe.view._server import TokenPage, make_server

__all__ = ["DEFAULT_TEXT", "EXAMPLES", "TokenPage", "TokenView", "make_server", "view_text"]
