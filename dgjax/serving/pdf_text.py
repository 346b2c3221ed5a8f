"""Text of an attached PDF (pypdf), with every way a PDF can be unusable turned into a 400.

PDFs come from clients, i.e. untrusted input: pypdf parses them in pure Python (its own limits
bound decompression), the page count is capped before any text is extracted, and any parser
failure means "corrupt", never a 500. Callers run this off the event loop.
"""

from __future__ import annotations

import io
import logging

from dgjax.serving.errors import APIError, bad_request

logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings on sloppy files are noise here


def pdf_to_text(data: bytes, param: str, max_pages: int) -> str:
    """The text of every page, pages separated by blank lines."""
    from pypdf import PasswordType, PdfReader
    from pypdf.errors import DependencyError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise bad_request(f"'{param}' is an encrypted PDF that needs a password; send it "
                              "without encryption.", param, "pdf_encrypted")
        num_pages = len(reader.pages)
        if num_pages > max_pages:
            raise bad_request(f"'{param}' is a PDF of {num_pages} pages; the limit is "
                              f"{max_pages} pages per file.", param, "pdf_too_many_pages")
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except APIError:
        raise
    except DependencyError as e:  # an encryption scheme this installation cannot decrypt
        raise bad_request(f"'{param}' is an encrypted PDF this server cannot decrypt ({e}).",
                          param, "pdf_encrypted") from None
    except Exception as e:  # noqa: BLE001 - any parser failure on client bytes is a bad file
        raise bad_request(f"'{param}' is not a readable PDF (corrupt or truncated): "
                          f"{type(e).__name__}: {e}", param, "pdf_unreadable") from None
    text = "\n\n".join(p for p in pages if p)
    if not text:
        raise bad_request(f"'{param}' is a PDF with no extractable text (scanned pages need OCR, "
                          "which this server does not do).", param, "pdf_no_text")
    return text
