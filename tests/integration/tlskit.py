"""tlskit.py: certificates for the TLS tests of HTTP upstreams, made with
the openssl command: a test CA, and leaves it signs (for 127.0.0.1, for
another name, or expired), each as a PEM certificate and key in a
directory of the caller's."""

import os
import subprocess


def _run(*argv):
    subprocess.run(argv, check=True, capture_output=True)


def ca(d, name="ca"):
    """A self-signed CA: (cert, key) paths."""
    cert, key = os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")
    _run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=appliance test " + name,
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return cert, key


_CA_CONF = """[ca]
default_ca = d
[d]
dir = {d}
database = {d}/index.txt
new_certs_dir = {d}
serial = {d}/serial
default_md = sha256
policy = any
copy_extensions = copy
unique_subject = no
[any]
commonName = supplied
"""


def leaf(d, name, authority, san="IP:127.0.0.1", expired=False):
    """A server certificate signed by authority (ca()'s pair) for san;
    expired: valid only in 2020. (cert, key) paths."""
    cert, key = os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")
    csr = os.path.join(d, name + ".csr")
    _run("openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + name,
         "-addext", "subjectAltName=" + san)
    work = os.path.join(d, name + ".ca")
    os.makedirs(work, exist_ok=True)
    open(os.path.join(work, "index.txt"), "w").close()
    with open(os.path.join(work, "serial"), "w") as f:
        f.write("%016X\n" % (abs(hash(name)) & 0xFFFFFFFFFFFF))
    conf = os.path.join(work, "ca.conf")
    with open(conf, "w") as f:
        f.write(_CA_CONF.format(d=work))
    dates = (["-startdate", "20200101000000Z", "-enddate", "20200102000000Z"] if expired
             else ["-days", "2"])
    _run("openssl", "ca", "-batch", "-config", conf, "-cert", authority[0], "-keyfile",
         authority[1], "-in", csr, "-out", cert, "-notext", *dates)
    return cert, key
