"""test_oauth.py: the HTTP front as an OAuth 2.1 resource server
(docs/http.md, OAuth): JWT access tokens of the authorization server the
policy names, checked against its keys (a JWK Set file or URL), the role
from a claim, the Protected Resource Metadata of RFC 9728, and every kind
of bad token refused with 401 or 403 and the challenge that says why.

Tokens are made here with PyJWT and cryptography (Debian's python3-jwt,
python3-cryptography), keys of the three algorithms the appliance takes.
Every wait is on a log line or an answer. Runs as root; needs
build/appliance, build/toy-server and build/image.
"""

import base64
import hashlib
import hmac
import http.client
import http.server
import json
import os
import signal
import threading
import time

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives import serialization

from harness import main, test
from mcphttp import McpHttp
import gatewaykit as gk

ISSUER = "https://idp.test"
STATIC = "appliance_test-token-oauth-0123456789"
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {}}


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def num(n, size=None):
    size = size or (n.bit_length() + 7) // 8
    return b64u(n.to_bytes(size, "big"))


class Keys:
    """An Ed25519, a P-256 and an RSA key, their JWKs under kids made of
    a prefix, and tokens signed by them."""

    def __init__(self, prefix):
        self.ed = ed25519.Ed25519PrivateKey.generate()
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = {"EdDSA": prefix + "-ed", "ES256": prefix + "-ec", "RS256": prefix + "-rsa"}

    def jwks(self):
        raw = self.ed.public_key().public_bytes(serialization.Encoding.Raw,
                                                serialization.PublicFormat.Raw)
        e = self.ec.public_key().public_numbers()
        r = self.rsa.public_key().public_numbers()
        return {"keys": [
            {"kty": "OKP", "crv": "Ed25519", "x": b64u(raw), "kid": self.kid["EdDSA"],
             "use": "sig"},
            {"kty": "EC", "crv": "P-256", "x": num(e.x, 32), "y": num(e.y, 32),
             "kid": self.kid["ES256"], "alg": "ES256"},
            {"kty": "RSA", "n": num(r.n), "e": num(r.e), "kid": self.kid["RS256"]}]}

    def token(self, alg="EdDSA", kid=None, **claims):
        key = {"EdDSA": self.ed, "ES256": self.ec, "RS256": self.rsa}[alg]
        return jwt.encode(claims, key, algorithm=alg,
                          headers={"kid": kid or self.kid[alg], "typ": "at+jwt"})


def hand_made(header, claims, sig=b""):
    """A token as bytes put together by hand: alg none, HMAC forgeries."""
    return "%s.%s.%s" % (b64u(json.dumps(header).encode()), b64u(json.dumps(claims).encode()),
                         b64u(sig))


class Served(gk.Served):
    """`appliance run` over HTTP on loopback: the toy as server `toy`, roles
    `reader` (toy.*) and `other`, one static token beside the OAuth ones,
    and http.oauth as given (the audience is this endpoint's URL)."""

    def __init__(self, oauth, audit=None, web=None):
        self.port = port = gk.free_port()
        self.audience = "http://127.0.0.1:%d/mcp" % port
        token = {"name": "static", "role": "reader",
                 "sha256": hashlib.sha256(STATIC.encode()).hexdigest()}
        extra = {"audit": {"path": audit}} if audit else {}
        servers, tools = {"toy": gk.toy_server()}, {"toy.*": {"access": "read"}}
        if web:
            servers["web"] = {"url": web}
            tools["web.*"] = {"access": "read"}
        sig = gk._kit.policy({"deadline_s": 60}, servers=servers, tools=tools,
                             roles={"reader": {"tools": list(tools)},
                                    "other": {"tools": []}},
                             clients={"tokens": [token]},
                             http={"listen": ["127.0.0.1:%d" % port],
                                   "oauth": dict({"issuer": ISSUER,
                                                  "audience": self.audience}, **oauth)},
                             **extra)
        super().__init__(sig, port, timeout=120)

    def wait(self, cond, timeout, what):
        deadline = time.time() + timeout
        while not cond():
            assert self.proc.poll() is None, "appliance exited; log:\n" + self.log()
            assert time.time() < deadline, "%s: not within %d s; log:\n%s" % (
                what, timeout, self.log()[-6000:])
            time.sleep(0.1)

    def request(self, method, path, headers=None, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            c.request(method, path, body, headers or {})
            r = c.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read().decode()
        finally:
            c.close()

    def call(self, bearer, code="print((await toy.add(a=2, b=3))[\"sum\"])"):
        """(status, headers, body) of a 2026-07-28 run_python call."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "run_python", "arguments": {"code": code},
                           "_meta": MODERN}}
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                   "Mcp-Name": "run_python"}
        if bearer is not None:
            headers["Authorization"] = "Bearer " + bearer
        return self.request("POST", "/mcp", headers, json.dumps(body))

    def ran(self, bearer):
        st, _, text = self.call(bearer)
        assert st == 200, (st, text, self.log()[-3000:])
        msgs = [json.loads(ln[6:]) for ln in text.splitlines() if ln.startswith("data: ")]
        return msgs[-1]["result"]["structuredContent"]["stdout"]


def claims(audience, **over):
    now = int(time.time())
    c = {"iss": ISSUER, "aud": audience, "sub": "alice", "exp": now + 300, "iat": now,
         "appliance_role": "reader"}
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}


def refused(s, token, status, error):
    st, hd, _ = s.call(token)
    want = 'Bearer error="%s", resource_metadata="http://127.0.0.1:%d' \
           '/.well-known/oauth-protected-resource/mcp"' % (error, s.port)
    assert (st, hd.get("www-authenticate")) == (status, want), (st, hd, want)


@test
def jwts_of_three_algorithms_run_cells_and_every_bad_one_is_refused():
    keys, stranger = Keys("k1"), Keys("k1")  # the stranger reuses the kids
    d = gk.work()
    jwks = os.path.join(d, "jwks.json")
    with open(jwks, "w") as f:
        json.dump(keys.jwks(), f)
    audit = os.path.join(d, "audit-oauth.jsonl")
    web = McpHttp().start()
    s = Served({"jwks_path": jwks}, audit=audit, web=web.url())
    try:
        aud = s.audience
        # the metadata, at the path-suffixed name and at the root
        for path in ("/.well-known/oauth-protected-resource/mcp",
                     "/.well-known/oauth-protected-resource"):
            st, hd, text = s.request("GET", path)
            assert st == 200 and hd["content-type"] == "application/json", (st, hd, text)
            assert json.loads(text) == {"resource": aud, "authorization_servers": [ISSUER],
                                        "bearer_methods_supported": ["header"]}, text
        # no token: the challenge names the metadata, and no error
        st, hd, _ = s.call(None)
        assert (st, hd.get("www-authenticate")) == (401, (
            'Bearer resource_metadata="http://127.0.0.1:%d'
            '/.well-known/oauth-protected-resource/mcp"' % s.port)), (st, hd)
        # the three algorithms, and the static token beside them
        for alg in ("EdDSA", "ES256", "RS256"):
            assert s.ran(keys.token(alg, **claims(aud))) == "5\n", alg
        # the token is never passed on: the HTTP server sees only what the
        # policy gives it
        jwt_used = keys.token(**claims(aud))
        st, _, text = s.call(jwt_used, 'print(await web.echo(text="hi"))')
        assert st == 200 and "hi" in text, (st, text)
        heads = [ln for ln in web.log if ln.startswith("headers ")]
        assert heads and not any(jwt_used in h or "eyJ" in h for h in heads), heads
        assert s.ran(STATIC) == "5\n"
        # an audience in an array, and a token within the skew of its exp
        assert s.ran(keys.token(**claims(aud, aud=["https://other", aud]))) == "5\n"
        assert s.ran(keys.token(**claims(aud, exp=int(time.time()) - 20))) == "5\n"
        # each refusal
        now = int(time.time())
        refused(s, keys.token(**claims(aud, exp=now - 3600)), 401, "invalid_token")
        refused(s, keys.token(**claims(aud, nbf=now + 3600)), 401, "invalid_token")
        refused(s, keys.token(**claims(aud, aud="http://127.0.0.1:1/mcp")), 401,
                "invalid_token")
        refused(s, keys.token(**claims(aud, iss="https://evil.test")), 401, "invalid_token")
        refused(s, keys.token(**claims(aud, sub=None)), 401, "invalid_token")
        refused(s, hand_made({"alg": "none", "typ": "JWT"}, claims(aud)), 401,
                "invalid_token")
        refused(s, hand_made({"alg": "none", "kid": "k1-ed"}, claims(aud)), 401,
                "invalid_token")
        # HS256 keyed with the public key, as JWKS bytes and as the raw key
        for secret in (json.dumps(keys.jwks()["keys"][0]).encode(),
                       base64.urlsafe_b64decode(keys.jwks()["keys"][0]["x"] + "=")):
            signing = "%s.%s" % (b64u(json.dumps({"alg": "HS256", "kid": "k1-ed"}).encode()),
                                 b64u(json.dumps(claims(aud)).encode()))
            mac = hmac.new(secret, signing.encode(), hashlib.sha256).digest()
            refused(s, signing + "." + b64u(mac), 401, "invalid_token")
        # a key the set lacks: another key under the same kid, and an unknown kid
        refused(s, stranger.token("EdDSA", **claims(aud)), 401, "invalid_token")
        refused(s, stranger.token("RS256", **claims(aud)), 401, "invalid_token")
        refused(s, keys.token(kid="nope", **claims(aud)), 401, "invalid_token")
        # a payload changed after signing
        good = keys.token(**claims(aud)).split(".")
        forged = b64u(json.dumps(claims(aud, sub="mallory")).encode())
        refused(s, ".".join([good[0], forged, good[2]]), 401, "invalid_token")
        # roles: none, one the policy lacks, a malformed one
        refused(s, keys.token(**claims(aud, appliance_role=None)), 403, "insufficient_scope")
        refused(s, keys.token(**claims(aud, appliance_role="admin")), 403,
                "insufficient_scope")
        refused(s, keys.token(**claims(aud, appliance_role=["reader"])), 401, "invalid_token")
        # a role that may call nothing is a role: the call runs, the tool is refused
        out = s.ran(keys.token(**claims(aud, appliance_role="other")))
        assert "5" not in out, out
        # a host the policy does not allow: 403 with no challenge
        st, hd, _ = s.request("GET", "/.well-known/oauth-protected-resource",
                              {"Host": "evil.example"})
        assert st == 403 and "www-authenticate" not in hd, (st, hd)
    finally:
        s.stop()
        web.stop()
    events = [json.loads(ln) for ln in open(audit)]
    clients = {e.get("client") for e in events if e["ev"] == "run.start"}
    assert clients == {"oauth:alice", "static"}, clients
    auth = [e for e in events if e["ev"] == "auth"]
    assert {a["outcome"] for a in auth} == {"accepted", "refused"}, auth
    text = open(audit).read()
    assert "eyJ" not in text, "a token reached the audit log"
    assert "eyJ" not in s.log(), "a token reached the log"


@test
def a_reload_reads_the_key_file_again_and_a_key_url_is_fetched_again():
    old, new = Keys("old"), Keys("new")
    d = gk.work()
    jwks = os.path.join(d, "jwks-reload.json")
    with open(jwks, "w") as f:
        json.dump(old.jwks(), f)
    s = Served({"jwks_path": jwks})
    try:
        aud = s.audience
        assert s.ran(old.token(**claims(aud))) == "5\n"
        refused(s, new.token(**claims(aud)), 401, "invalid_token")
        with open(jwks, "w") as f:
            json.dump(new.jwks(), f)
        mark = len(s.lines)
        s.proc.send_signal(signal.SIGHUP)
        s.wait_log("reloaded: serial")
        assert any("oauth: 3 keys from " + jwks in ln for ln in s.lines[mark:]), s.log()
        assert s.ran(new.token("ES256", **claims(aud))) == "5\n"
        refused(s, old.token(**claims(aud)), 401, "invalid_token")
    finally:
        s.stop()

    # a URL: fetched at start; a token with a kid the set lacks makes it
    # fetched again, and the key the server added since is then taken
    served = {"doc": old.jwks(), "gets": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            served["gets"] += 1
            body = json.dumps(served["doc"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    idp = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=idp.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/jwks" % idp.server_address[1]
    s = Served({"jwks_url": url, "jwks_refresh_s": 3600})
    try:
        aud = s.audience
        assert served["gets"] == 1, served
        assert s.ran(old.token("RS256", **claims(aud))) == "5\n"
        served["doc"] = {"keys": old.jwks()["keys"] + new.jwks()["keys"][:1]}
        mark = len(s.lines)
        refused(s, new.token(**claims(aud)), 401, "invalid_token")
        s.wait(lambda: any("oauth: 4 keys from " + url in ln for ln in s.lines[mark:]), 30,
               "the keys fetched again")
        assert s.ran(new.token(**claims(aud))) == "5\n"
        # another unknown kid at once does not make another fetch
        gets = served["gets"]
        refused(s, new.token(kid="other", **claims(aud)), 401, "invalid_token")
        assert served["gets"] == gets, served
    finally:
        s.stop()
        idp.shutdown()


@test
def a_policy_with_a_bad_oauth_section_or_unreadable_keys_is_refused_at_start():
    d = gk.work()
    bad = os.path.join(d, "jwks-private.json")
    k = Keys("p")
    priv = k.jwks()
    priv["keys"][0]["d"] = b64u(os.urandom(32))
    with open(bad, "w") as f:
        json.dump(priv, f)
    port = gk.free_port()
    cases = [
        ({"jwks_path": bad}, "private"),
        ({"jwks_path": os.path.join(d, "absent.json")}, "jwks_path"),
        ({"jwks_url": "http://127.0.0.1:1/jwks"}, "jwks_url"),
        ({}, "exactly one of jwks_path"),
        ({"jwks_path": bad, "jwks_url": "http://127.0.0.1:1/j"}, "exactly one of jwks_path"),
        ({"jwks_path": bad, "jwks_refresh_s": 600}, "only with jwks_url"),
        ({"jwks_url": "http://idp.example/jwks"}, "https://"),
    ]
    for oauth, said in cases:
        try:
            sig = gk._kit.policy({"deadline_s": 60}, servers={"toy": gk.toy_server()},
                                 tools={"toy.*": {"access": "read"}},
                                 roles={"reader": {"tools": ["toy.*"]}},
                                 http={"listen": ["127.0.0.1:%d" % port],
                                       "oauth": dict({"issuer": ISSUER,
                                                      "audience": "http://127.0.0.1/mcp"},
                                                     **oauth)})
        except gk.subprocess.CalledProcessError as e:  # `sign` checks the policy first
            err = e.stderr.decode()
            assert said in err, (oauth, err)
            continue
        p = gk.subprocess.run(gk.run_argv(sig), capture_output=True, text=True, timeout=120)
        assert p.returncode != 0 and said in p.stderr, (oauth, p.returncode, p.stderr[-2000:])
    # a quote in the audience would end the challenge's quoted string
    try:
        gk._kit.policy({}, http={"listen": ["127.0.0.1:%d" % port],
                                 "oauth": {"issuer": ISSUER, "jwks_path": bad,
                                           "audience": 'http://127.0.0.1/m"cp'}})
        assert False, "signed"
    except gk.subprocess.CalledProcessError as e:
        assert "quote" in e.stderr.decode(), e.stderr

if __name__ == "__main__":
    main()
