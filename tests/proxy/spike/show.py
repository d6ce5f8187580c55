import json,sys
for l in open(sys.argv[1]):
    r=json.loads(l); print(r['t'], r['method'], r['path'], r['body_bytes'], json.dumps(r['shape'])[:900], '=>', json.dumps(r['reply'])[:250]); print()
