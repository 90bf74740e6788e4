"""The service the commands and the Ansible collection call (as octoDNS's Manager).

It loads, reads, plans, applies, adopts and exports, taking Settings and typed
requests and returning typed results; the click commands parse options, call it
and render what it returns. offline.py needs no network (validate imports only it,
so never requests); online.py is the API session (``Service``); apply.py, adopt.py
and export.py are what those commands do with it.
"""
