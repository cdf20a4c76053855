// A SunSpider-like JavaScript workload for engines that allocate through malloc (duktape's
// duk, mujs): objects, strings, arrays, closures, JSON and regular expressions, in the spirit
// of SunSpider 1.0's tests (access-binary-trees, string-base64, string-tagcloud, regexp-dna,
// crypto-md5's string work, date-format), written here in ES5 so that both engines run it.
//
//   duk js_suite.js        mujs js_suite.js
//
// Everything is generated from a fixed seed; the script prints one line per part with a
// checksum, the same text under every allocator and engine. ROUNDS scales the work.
var ROUNDS = 4;

var seed = 20261126;
function random() {  // a 31-bit linear congruential generator: the same numbers everywhere
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}
function randomInt(n) { return Math.floor(random() * n); }

function checksum(text, sum) {
  sum = sum || 0;
  for (var i = 0; i < text.length; i += 3) sum = (sum * 31 + text.charCodeAt(i)) % 1000000007;
  return (sum * 31 + text.length) % 1000000007;
}

var WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota",
             "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau",
             "upsilon", "phi", "chi", "psi", "omega", "tree", "run", "page", "chunk", "slab"];

// Binary trees: many small objects, allocated and dropped by depth (access-binary-trees).
function TreeNode(left, right, item) { this.left = left; this.right = right; this.item = item; }
TreeNode.prototype.check = function () {
  if (this.left === null) return this.item;
  return this.item + this.left.check() - this.right.check();
};
function bottomUp(item, depth) {
  if (depth > 0)
    return new TreeNode(bottomUp(2 * item - 1, depth - 1), bottomUp(2 * item, depth - 1), item);
  return new TreeNode(null, null, item);
}
function binaryTrees() {
  var total = 0;
  for (var depth = 4; depth <= 10; depth += 2) {
    var iterations = 1 << (10 - depth + 4);
    for (var i = 1; i <= iterations; i++)
      total += bottomUp(i, depth).check() + bottomUp(-i, depth).check();
  }
  var longLived = bottomUp(0, 11);
  return total + longLived.check();
}

// Base64 of generated text, encoded and decoded (string-base64): strings built piecewise.
var BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
function toBase64(data) {
  var out = [];
  for (var i = 0; i < data.length; i += 3) {
    var a = data.charCodeAt(i), b = data.charCodeAt(i + 1), c = data.charCodeAt(i + 2);
    var hasB = i + 1 < data.length, hasC = i + 2 < data.length;
    if (!hasB) b = 0;
    if (!hasC) c = 0;
    out.push(BASE64.charAt(a >> 2), BASE64.charAt(((a & 3) << 4) | (b >> 4)),
             hasB ? BASE64.charAt(((b & 15) << 2) | (c >> 6)) : "=",
             hasC ? BASE64.charAt(c & 63) : "=");
  }
  return out.join("");
}
function fromBase64(text) {
  var out = "";
  for (var i = 0; i < text.length; i += 4) {
    var n = (BASE64.indexOf(text.charAt(i)) << 18) | (BASE64.indexOf(text.charAt(i + 1)) << 12);
    out += String.fromCharCode((n >> 16) & 255);
    if (text.charAt(i + 2) !== "=") {
      n |= BASE64.indexOf(text.charAt(i + 2)) << 6;
      out += String.fromCharCode((n >> 8) & 255);
    }
    if (text.charAt(i + 3) !== "=") {
      n |= BASE64.indexOf(text.charAt(i + 3));
      out += String.fromCharCode(n & 255);
    }
  }
  return out;
}
function base64() {
  var sum = 0;
  for (var k = 0; k < 8; k++) {
    var text = "";
    for (var i = 0; i < 2000; i++) text += String.fromCharCode(32 + randomInt(95));
    var encoded = toBase64(text);
    if (fromBase64(encoded) !== text) throw new Error("base64 round trip failed");
    sum = checksum(encoded, sum);
  }
  return sum;
}

// A tag cloud from JSON (string-tagcloud): records parsed, counted, sorted, rendered.
function makeRecords(n) {
  var records = [];
  for (var i = 0; i < n; i++) {
    var tags = [];
    for (var t = randomInt(5); t >= 0; t--) tags.push(WORDS[randomInt(WORDS.length)]);
    records.push({ id: i, name: WORDS[randomInt(WORDS.length)] + "-" + i,
                   score: randomInt(1000), tags: tags,
                   nested: { group: WORDS[i % 7], weight: random() } });
  }
  return records;
}
function tagCloud() {
  var text = JSON.stringify(makeRecords(300));
  var records = JSON.parse(text);
  var counts = {};
  for (var i = 0; i < records.length; i++)
    for (var t = 0; t < records[i].tags.length; t++) {
      var tag = records[i].tags[t];
      counts[tag] = (counts[tag] || 0) + records[i].score;
    }
  var tags = [];
  for (var name in counts) if (counts.hasOwnProperty(name)) tags.push({ tag: name, n: counts[name] });
  tags.sort(function (a, b) { return b.n - a.n || (a.tag < b.tag ? -1 : 1); });
  var html = tags.map(function (t) {
    return '<span class="tag" style="font-size:' + (10 + t.n % 17) + 'px">' + t.tag + "</span>";
  }).join(" ");
  return checksum(html, checksum(text));
}

// DNA-like text searched and rewritten with regular expressions (regexp-dna).
function regexps() {
  var bases = "acgt", parts = [];
  for (var i = 0; i < 20000; i++) parts.push(bases.charAt(randomInt(4)));
  var dna = parts.join("");
  var patterns = [/agggtaaa|tttaccct/ig, /[cgt]gggtaaa|tttaccc[acg]/ig, /a[act]ggtaaa|tttacc[agt]t/ig,
                  /ag[act]gtaaa|tttac[agt]ct/ig, /aggg[acg]aaa|ttt[cgt]ccct/ig];
  var sum = 0;
  for (var p = 0; p < patterns.length; p++) {
    var found = dna.match(patterns[p]);
    sum += found ? found.length : 0;
  }
  var replaced = dna.replace(/a/g, "<A>").replace(/c+g/g, function (m) { return m.length + ":"; });
  var words = replaced.split(/[<>:]/);
  return checksum(replaced, sum + words.length);
}

// Closures and arrays: counters, memoized functions, partial application, filter/map/reduce.
function closures() {
  function counter() { var n = 0; return function (k) { n += k; return n; }; }
  function memoize(f) {
    var cache = {};
    return function (x) { var key = "k" + x; if (!(key in cache)) cache[key] = f(x); return cache[key]; };
  }
  var fib = memoize(function (n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); });
  var sum = 0;
  for (var round = 0; round < 200; round++) {
    var counters = [];
    for (var i = 0; i < 100; i++) counters.push(counter());
    for (var j = 0; j < 100; j++) sum += counters[j](j + round);
    var values = [];
    for (var k = 0; k < 200; k++) values.push({ v: randomInt(1000), s: "x" + k });
    sum += values.filter(function (o) { return o.v % 3 === 0; })
                 .map(function (o) { return o.v + o.s.length; })
                 .reduce(function (a, b) { return a + b; }, 0);
    sum = (sum + fib(10 + round % 20)) % 1000000007;
  }
  return sum;
}

// Formatted strings (date-format-like): a record formatted many ways, then split again.
function formats() {
  var lines = [];
  for (var i = 0; i < 1500; i++) {
    var y = 1990 + randomInt(40), m = 1 + randomInt(12), d = 1 + randomInt(28);
    var pad = function (n) { return n < 10 ? "0" + n : "" + n; };
    lines.push(y + "-" + pad(m) + "-" + pad(d) + "T" + pad(randomInt(24)) + ":" +
               pad(randomInt(60)) + " " + WORDS[randomInt(WORDS.length)].toUpperCase());
  }
  var text = lines.join("\n"), back = text.split("\n"), sum = 0;
  for (var k = 0; k < back.length; k++) sum += back[k].split(/[-T: ]/).length;
  return checksum(text, sum);
}

var parts = [["binary-trees", binaryTrees], ["base64", base64], ["tagcloud", tagCloud],
             ["regexp", regexps], ["closures", closures], ["formats", formats]];
for (var round = 0; round < ROUNDS; round++) {
  for (var p = 0; p < parts.length; p++) {
    var result = parts[p][1]();
    if (round === ROUNDS - 1) print(parts[p][0] + " " + result);
  }
}
