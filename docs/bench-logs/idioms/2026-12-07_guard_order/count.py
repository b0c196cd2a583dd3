import json, re, collections
decl = re.compile(r"^\s*(?:const\s+)?(?:unsigned\s+)?(?:int|size_t|long|unsigned)\s+(\w+)\s*=\s*[^;]*blockIdx\.([xyz])[^;]*threadIdx[^;]*;")
guard = re.compile(r"^\s*if\s*\(\s*(\w+)\s*(<|>=)\s*\w+\s*(&&|\|\|)\s*(\w+)\s*(<|>=)\s*\w+\s*\)")
c = collections.Counter()
for line in open("data/corpus/train.jsonl"):
    e = json.loads(line)
    if e.get("lang") != "cuda": continue
    lines = e["text"].split("\n")
    for k, l in enumerate(lines):
        g = guard.match(l)
        if not g: continue
        a, b = g[1], g[4]
        # find declarations of a and b in the previous 8 lines
        order = []; axes = {}
        for m in lines[max(0,k-8):k]:
            d = decl.match(m)
            if d and d[1] in (a, b): order.append(d[1]); axes[d[1]] = d[2]
        if set(order) != {a, b}: continue
        # use order below: first appearance in next 6 lines
        below = " ".join(lines[k+1:k+7]) + " " + l[g.end():]
        pos = {n: (re.search(rf"\b{n}\b", below).start() if re.search(rf"\b{n}\b", below) else 10**9) for n in (a,b)}
        use_first = min((a,b), key=lambda n: pos[n])
        c[("declared first", axes[order[0]], "tested first", axes[a])] += 1
        c["use order" if use_first == a else "use reversed"] += 1
        c["y first" if axes[a] == "y" else "x first" if axes[a]=="x" else "other"] += 1
print(c)
