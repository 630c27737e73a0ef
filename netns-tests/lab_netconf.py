#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""NETCONF client side of lab.netconf, on Debian's python3-ncclient (SSH).

  lab_netconf.py hello HOST:PORT KEY              the server's capabilities, one a line
  lab_netconf.py get HOST:PORT KEY [--config] [--subtree NAME]
                                                  <data> of get (get-config with --config)
  lab_netconf.py edit HOST:PORT KEY FILE          edit-config of running with FILE's <config>;
                                                  exit 3 and "rpc-error TAG|PATH|MESSAGE" on an rpc-error
  lab_netconf.py listen HOST:PORT KEY SECONDS     create-subscription, then every notification's
                                                  XML (one a line) for SECONDS
  lab_netconf.py tree-xml TOPOLOGY SWITCH TREE_ID KEY OUT_XML OUT_DIR [--op OP]
                                                  a single-switch tree over every host of SWITCH
                                                  (member QPN 1000+rank, switch QPN 0x400+rank)
                                                  and each rank's MemberAssignment in OUT_DIR/asg<rank>.json

Every command but tree-xml takes `--user NAME` (default operator): the SSH user, which the switch
allows a certificate's key only as its CN.

KEY is a PEM EC private key in SEC1 form ("EC PRIVATE KEY"; paramiko reads no
PKCS#8): `openssl ec -in x.key -out x.ec` turns a control-plane key into one.
"""
import json
import sys
import time

NC = "urn:ietf:params:xml:ns:netconf:base:1.0"
INCS = "urn:incin:yang:incin-switch"


def connect(addr, key, user):
    from ncclient import manager
    host, port = addr.rsplit(":", 1)
    return manager.connect(host=host, port=int(port), username=user, key_filename=key,
                           hostkey_verify=False, allow_agent=False, look_for_keys=False, timeout=15)


def rpc_error(e):
    tag = getattr(e, "tag", "") or ""
    path = getattr(e, "path", "") or ""
    msg = (getattr(e, "message", "") or str(e)).strip()
    return "rpc-error %s|%s|%s" % (tag, path.strip(), msg)


def main(argv):
    cmd = argv[1]
    if cmd == "tree-xml":
        return tree_xml(argv[2:])
    user = "operator"
    if "--user" in argv:
        i = argv.index("--user")
        user = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    addr, key = argv[2], argv[3]
    from ncclient.operations.rpc import RPCError
    with connect(addr, key, user) as m:
        if cmd == "hello":
            for c in m.server_capabilities:
                print(c)
            return 0
        if cmd == "get":
            flt = None
            if "--subtree" in argv:
                name = argv[argv.index("--subtree") + 1]
                flt = ("subtree", '<%s xmlns="%s"/>' % (name, INCS))
            r = m.get_config(source="running", filter=flt) if "--config" in argv else m.get(filter=flt)
            print(r.data_xml)
            return 0
        if cmd == "edit":
            config = open(argv[4]).read()
            try:
                m.edit_config(target="running", config=config)
            except RPCError as e:
                print(rpc_error(e))
                return 3
            print("ok")
            return 0
        if cmd == "listen":
            m.create_subscription()
            end = time.time() + float(argv[4])
            while time.time() < end:
                n = m.take_notification(block=True, timeout=0.5)
                if n is not None:
                    print(n.notification_xml.replace("\n", ""), flush=True)
            return 0
    print("unknown command " + cmd, file=sys.stderr)
    return 2


def tree_xml(args):
    topo_file, switch, tree_id, key, out_xml, out_dir = args[:6]
    op = args[args.index("--op") + 1] if "--op" in args else ""
    topo = json.load(open(topo_file))
    hosts = [h for h in topo["hosts"] if h["switch_name"] == switch]
    members = []
    for r, h in enumerate(hosts):
        members.append(
            "<member><rank>%d</rank><identity>%s</identity><port>%s</port><peer-mac>%s</peer-mac>"
            "<peer-ip>%s</peer-ip><peer-qpn>%d</peer-qpn><switch-qpn>%d</switch-qpn>"
            "<member-lo>%d</member-lo><member-hi>%d</member-hi></member>"
            % (r, h["name"], h["switch_port"], h["mac"], h["ip"], 1000 + r, 0x400 + r, r, r + 1))
    attr = ' xmlns:nc="%s" nc:operation="%s"' % (NC, op) if op else ""
    xml = ('<config xmlns="%s"><trees xmlns="%s"><tree%s><id>%s</id><key>%s</key><role>single</role>'
           "<pool-size>64</pool-size><slot-base>0</slot-base>%s<job-id>netconf-lab</job-id></tree></trees></config>"
           % (NC, INCS, attr, tree_id, key, "".join(members)))
    open(out_xml, "w").write(xml)
    # The switch side of each member: its port's address, from the switch's
    # state over NETCONF is not needed here: the lab numbers the switch port
    # .1 in the host's /24 with the host's MAC ending in :01.
    for r, h in enumerate(hosts):
        ip = h["ip"].rsplit(".", 1)[0] + ".1"
        mac = h["mac"].rsplit(":", 1)[0] + ":01"
        asg = {"treeId": int(tree_id), "key": int(key), "poolSize": 64, "rankAtSwitch": r, "memberIndex": r,
               "switchName": switch, "switchIp": ip, "switchMac": mac, "switchQpn": 0x400 + r,
               "worldSize": len(hosts), "memberIndexOfRank": list(range(len(hosts)))}
        json.dump(asg, open("%s/asg%d.json" % (out_dir, r), "w"))
    print(len(hosts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
