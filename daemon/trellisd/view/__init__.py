"""A session in the browser: a read-only web page served on 127.0.0.1 (``trellisd view``,
and ``session/view`` for the editors, one server per daemon) and the same view as one
self-contained HTML file (``trellisd report``).

    reader   what the view reads, through the services
    markup   Markdown, side-by-side diffs, the spending chart
    pages    the HTML (Jinja2 templates, autoescaped) and its Content-Security-Policy
    server   the aiohttp server: one-time tokens, cookies, Host check, headers
    shared   the daemon's one server, started on the first ``session/view``
    command  ``trellisd view`` and ``trellisd report``
"""
