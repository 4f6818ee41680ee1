// Checks that a request came from `delayer webhook`, unchanged and recent.
const crypto = require("node:crypto");

const MAX_AGE = 300; // seconds: an older (or replayed) request is refused

// timestamp, signature: the X-Delayer-Timestamp and X-Delayer-Signature
// headers; body: the raw request body as a Buffer (express.raw(), say),
// before any JSON parsing.
function verify(secret, timestamp, signature, body) {
  if (!/^[0-9]+$/.test(timestamp) || Math.abs(Date.now() / 1000 - Number(timestamp)) > MAX_AGE) {
    return false;
  }
  const mac = crypto.createHmac("sha256", secret).update(timestamp + ".").update(body);
  const expected = Buffer.from("sha256=" + mac.digest("hex"));
  const given = Buffer.from(String(signature));
  return given.length === expected.length && crypto.timingSafeEqual(given, expected);
}

module.exports = { verify };

if (require.main === module) { // WEBHOOK_SECRET=... node verify.js TIMESTAMP SIGNATURE < body
  const ok = verify(process.env.WEBHOOK_SECRET, process.argv[2], process.argv[3], require("node:fs").readFileSync(0));
  console.log(ok ? "valid" : "invalid");
  process.exit(ok ? 0 : 1);
}
