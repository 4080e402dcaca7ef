#!/usr/bin/python3
"""A GDBus client of rpm-ostree's transaction API, done the way rpm-ostree's own CLI does it:
RegisterClient, read the pending kernel arguments, KernelArgs, connect to the transaction
peer-to-peer, subscribe to its signals, Start, wait for Finished, Reload.

Usage: gdbus_kargs_client.py BUS_ADDRESS OSNAME KARG
Prints one line per signal; exits 0 when the transaction succeeded.
"""
import sys

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

NAME = "org.projectatomic.rpmostree1"
SYSROOT = "/org/projectatomic/rpmostree1/Sysroot"

bus_address, osname, karg = sys.argv[1:4]
bus = Gio.DBusConnection.new_for_address_sync(
    bus_address,
    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
    | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
    None,
    None,
)


def call(path, iface, method, args, reply):
    return bus.call_sync(
        NAME, path, NAME + "." + iface, method, args,
        GLib.VariantType(reply), Gio.DBusCallFlags.NONE, -1, None,
    ).unpack()


call(SYSROOT, "Sysroot", "RegisterClient",
     GLib.Variant("(a{sv})", ({"id": GLib.Variant("s", "gdbus-test")},)), "()")
(os_path,) = call(SYSROOT, "Sysroot", "GetOS", GLib.Variant("(s)", (osname,)), "(o)")
(bootcfg,) = call(os_path, "OS", "GetDeploymentBootConfig",
                  GLib.Variant("(sb)", ("", True)), "(a{sv})")
(address,) = call(os_path, "OS", "KernelArgs",
                  GLib.Variant("(sasasasa{sv})", (bootcfg["options"], [karg], [], [], {})),
                  "(s)")
print("address", address, flush=True)

peer = Gio.DBusConnection.new_for_address_sync(
    address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT, None, None)
loop = GLib.MainLoop()
finished = []


def on_signal(_conn, _sender, _path, _iface, name, params):
    print(name, params.unpack(), flush=True)
    if name == "Finished":
        finished.append(params.unpack())
        loop.quit()


peer.signal_subscribe(None, NAME + ".Transaction", None, "/", None,
                      Gio.DBusSignalFlags.NONE, on_signal)
(started,) = peer.call_sync(None, "/", NAME + ".Transaction", "Start", None,
                            GLib.VariantType("(b)"), Gio.DBusCallFlags.NONE, -1,
                            None).unpack()
print("started", started, flush=True)
GLib.timeout_add_seconds(30, loop.quit)
loop.run()
call(SYSROOT, "Sysroot", "Reload", None, "()")
success = bool(finished) and finished[0][0]
sys.exit(0 if success else 1)
