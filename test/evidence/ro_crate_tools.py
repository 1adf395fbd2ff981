# Test helper for test/evidence/ro-crate.test.ts: reads an RO-Crate with independent tools from PyPI
# (pinned in workers/python/pyproject.toml's `test` extra), never with detsim's own code.
#   seed-cache CACHE CONTEXT  puts the RO-Crate 1.1 JSON-LD context (a byte-exact copy of the one
#                             published at https://w3id.org/ro/crate/1.1/context, CC0-1.0) into the
#                             HTTP cache of rocrate-validator (requests-cache, SQLite) under that URL,
#                             so `rocrate-validator validate --offline --cache-path CACHE` runs with no
#                             network; any other URL it asks for is a cache miss it reports.
#   load CRATE                loads the crate with the rocrate library (ROCrate(dir)) and prints what it
#                             sees as JSON: root, actions (instrument, object, result, times), data and
#                             contextual entities, and each File entity's sha256 and size against the
#                             file on disk (hashlib, os.stat).
# Not a validator of its own: the checks are the tools' and the test's.
import hashlib
import io
import json
import os
import sys

CONTEXT_URL = 'https://w3id.org/ro/crate/1.1/context'


def seed_cache(cache_name, context_path):
    from requests.adapters import HTTPAdapter
    from requests_cache import CachedSession
    from urllib3 import HTTPResponse

    with open(context_path, 'rb') as f:
        body = f.read()

    class LocalContext(HTTPAdapter):
        """Answers the context URL from the local copy, anything else 404 (never the network)."""

        def send(self, request, **kwargs):
            ok = request.url == CONTEXT_URL
            raw = HTTPResponse(
                body=io.BytesIO(body if ok else b''),
                headers={'Content-Type': 'application/ld+json'},
                status=200 if ok else 404,
                preload_content=False,
                request_url=request.url,
            )
            return self.build_response(request, raw)

    session = CachedSession(
        cache_name=cache_name,
        backend='sqlite',
        expire_after=-1,
        allowable_methods=('GET',),
        allowable_codes=(200,),
    )
    session.mount('https://', LocalContext())
    session.mount('http://', LocalContext())
    r = session.get(CONTEXT_URL, headers={'Accept': 'application/ld+json, application/json, */*;q=0.1'})
    cached = session.get(CONTEXT_URL)
    json.dump(
        {
            'status': r.status_code,
            'sha256': hashlib.sha256(r.content).hexdigest(),
            'fromCache': bool(getattr(cached, 'from_cache', False)),
        },
        sys.stdout,
    )


def as_list(v):
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def ref(e):
    """An entity as id, types and (for a PropertyValue) value; a plain value as itself."""
    if not hasattr(e, 'id'):
        return {'literal': e}
    return {'id': e.id, 'type': as_list(e.type), 'value': e.get('value')}


def file_check(crate_dir, e):
    path = os.path.join(crate_dir, *e.id.split('/'))
    if not os.path.isfile(path):
        return {'id': e.id, 'exists': False}
    with open(path, 'rb') as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return {
        'id': e.id,
        'exists': True,
        'sha256': digest,
        'bytes': os.stat(path).st_size,
        'declaredSha256': e.get('sha256'),
        'declaredContentSize': e.get('contentSize'),
    }


def load(crate_dir):
    from rocrate.rocrate import ROCrate

    crate = ROCrate(crate_dir)
    root = crate.root_dataset
    actions = []
    for e in crate.get_entities():
        if 'CreateAction' not in as_list(e.type):
            continue
        instrument = e.get('instrument')
        actions.append(
            {
                'id': e.id,
                'instrument': [ref(i) for i in as_list(instrument)],
                'softwareRequirements': [
                    ref(s)
                    for i in as_list(instrument)
                    if hasattr(i, 'get')
                    for s in as_list(i.get('softwareRequirements'))
                ],
                'object': [ref(o) for o in as_list(e.get('object'))],
                'result': [ref(o) for o in as_list(e.get('result'))],
                'startTime': e.get('startTime'),
                'endTime': e.get('endTime'),
                'actionStatus': e.get('actionStatus'),
            }
        )
    out = {
        'root': {
            'id': root.id,
            'conformsTo': [ref(c) for c in as_list(root.get('conformsTo'))],
            'license': [ref(c) for c in as_list(root.get('license'))],
            'hasPart': sorted(p.id for p in as_list(root.get('hasPart'))),
            'mentions': sorted(m.id for m in as_list(root.get('mentions'))),
        },
        'actions': sorted(actions, key=lambda a: a['id']),
        'files': sorted((file_check(crate_dir, d) for d in crate.data_entities), key=lambda f: f['id']),
        'contextual': sorted(
            (
                {
                    'id': c.id,
                    'type': as_list(c.type),
                    'sha256': c.get('sha256'),
                    'contentSize': c.get('contentSize'),
                    'exists': os.path.exists(os.path.join(crate_dir, *c.id.lstrip('#').split('/'))),
                }
                for c in crate.contextual_entities
            ),
            key=lambda c: c['id'],
        ),
    }
    json.dump(out, sys.stdout)


if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == 'seed-cache':
        seed_cache(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == 'load':
        load(sys.argv[2])
    else:
        sys.exit('usage: ro_crate_tools.py seed-cache CACHE CONTEXT | load CRATE')
