"""`mlpsych app`: the Streamlit page in the browser, from an installed mlpsych (a checkout can also run
`streamlit run app.py`)."""

from __future__ import annotations

import argparse


def port_number(value: str) -> int:
    """A TCP port (1-65535), refused by argparse in one line otherwise."""
    try:
        port = int(value)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number (1-65535)")
    return port


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "app", help="the page in the browser: upload papers, run, review answers (needs mlpsych[app])",
        description="Start the Streamlit page on this machine and print its address; open it in a browser. Ctrl-C "
                    "stops it.")
    p.add_argument("--port", type=port_number, default=None,
                   help="port to listen on (default: 8501, or the next free one)")
    p.add_argument("--address", "--host", dest="address", default=None,
                   help="address to listen on (default: localhost, only this machine; 0.0.0.0 lets other machines "
                        "open the page, and with it read any folder this machine can)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from mlpsych.app import launch

    return launch.serve(args.port, args.address)
