#!/usr/bin/env python3
"""The unmasked main loop of an attention kernel's SASS, for before/after comparisons (issue 22).

  tools/sass_loop.py OLD.sass NEW.sass         one kernel: its loop and hot path, old against new
  tools/sass_loop.py --dir DIR                 every kernel a `KEEP=DIR tools/compare_sass.sh` kept

Input: `cuobjdump -sass` text (compare_sass.sh's dumps). The main loop is the innermost loop (a
backward branch before the function's last EXIT; the mbarrier retry stubs after it are left out)
that holds HGMMA and the per-block vote (BAR.RED), or the last HGMMA loop where there is no vote
(d256 causal). Its hot path is one iteration as most blocks run it: every mbarrier already
complete (the try-wait falls through), every other forward branch taken (O's rescale skipped, the
vote passed, leader-only code jumped over). Reported per kernel: instructions in the kernel, in the
loop and on the hot path, HGMMA in the kernel, local-memory accesses, and whether the loop's math
and synchronisation (FADD FFMA MUFU FMNMX FMUL F2FP HGMMA SHFL BAR SYNCS VOTE FSETP FSEL) are the
same multiset. --diff prints the hot paths' differences with registers renamed away.
"""
import collections
import difflib
import re
import sys

MATH = re.compile(r'\b(FADD|FFMA|MUFU|FMNMX|FMUL|F2FP|HGMMA|SHFL|BAR|SYNCS|VOTE|FSETP|FSEL)\b')
REG = re.compile(r'\b(U?R\d+|U?P\d)\b')


def parse(path):
    ins = []
    for line in open(path):
        m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s*(.*?)\s*;?\s*/\*', line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).rstrip(' ;')))
    return ins


def norm(t):
    return re.sub(r'0x[0-9a-f]+', 'ADDR', t) if re.search(r'\b(BRA|BSSY|CALL|BRX|JMP)\b', t) else t


def opcode(t):
    w = t.split()
    return (w[1] if w[0].startswith('@') else w[0]).split('.')[0]


def main_loop(ins):
    last_exit = max(a for a, t in ins if t.endswith('EXIT') and not t.startswith('@'))
    idx = {a: i for i, (a, _) in enumerate(ins)}
    loops = []
    for i, (a, t) in enumerate(ins):
        m = re.search(r'BRA\s.*?(0x[0-9a-f]+)', t)
        if m and a < last_exit and int(m.group(1), 16) <= a:
            body = ins[idx[int(m.group(1), 16)]:i + 1]
            if any('HGMMA' in x for _, x in body):
                loops.append(dict(lo=body[0][0], hi=a, body=body, vote=any('BAR.RED' in x for _, x in body)))
    inner = [l for l in loops if not any(o is not l and l['lo'] <= o['lo'] and o['hi'] <= l['hi'] for o in loops)]
    return ([l for l in inner if l['vote']] or inner)[-1]


def hot_path(loop):
    body = loop['body']
    idx = {a: i for i, (a, _) in enumerate(body)}
    path, i = [], 0
    while i < len(body):
        a, t = body[i]
        path.append(t)
        m = re.match(r'@!?U?P\d BRA (0x[0-9a-f]+)', t)
        if m:
            tgt = int(m.group(1), 16)
            if tgt == loop['lo']:
                break  # the back edge: one iteration
            if 'TRYWAIT' in body[i - 1][1] or tgt not in idx:
                i += 1  # barrier complete (or a branch out of the loop): fall through
                continue
            i = idx[tgt]
            continue
        i += 1
    return path


def summary(path):
    ins = parse(path)
    loop = main_loop(ins)
    body = [t for _, t in loop['body']]
    return dict(total=len(ins), hgmma=sum('HGMMA' in t for _, t in ins),
                local=sum(bool(re.search(r'\b(LDL|STL)\b', t)) for _, t in ins),
                loop=len(body), hot=hot_path(loop),
                math=collections.Counter(opcode(t) for t in body if MATH.search(t)))


def compare(old_path, new_path, label, diff=False):
    a, b = summary(old_path), summary(new_path)
    print(f"{label:48s} {a['total']:5d}>{b['total']:5d} {a['hgmma']:3d}>{b['hgmma']:3d} {a['loop']:4d}>{b['loop']:4d} "
          f"{len(a['hot']):4d}>{len(b['hot']):4d}  {'yes' if a['math'] == b['math'] else 'NO '}  {a['local']}/{b['local']}")
    if diff:
        na = [REG.sub('#', norm(x).replace('.reuse', '')) for x in a['hot']]
        nb = [REG.sub('#', norm(x).replace('.reuse', '')) for x in b['hot']]
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, na, nb, autojunk=False).get_opcodes():
            if tag != 'equal':
                print(f"    {tag}: {na[i1:i2]} -> {nb[j1:j2]}")


def main(argv):
    diff = '--diff' in argv
    argv = [x for x in argv if x != '--diff']
    print(f"{'kernel':48s} {'instr':>11s} {'HGMMA':>7s} {'loop':>9s} {'hot path':>9s}  math  LDL/STL")
    if argv[0] == '--dir':
        d = argv[1]
        specs = open(f'{d}/specs').read().split('\n')[:-1]
        for n, spec in enumerate(specs):
            short = re.sub(r'dtype=|head_dim=|,head_dim_v=\d+|stages=2,|,overlap=1,pingpong=1', '', spec)
            for long_name, abbreviation in (('causal=', 'c'), ('consumer_wgs=', 'wg'), ('block_m=', 'bm'), ('block_n=', 'bn'),
                                            ('cluster=', 'cl'), ('varlen=1', 'vl'), ('paged=1', 'pg')):
                short = short.replace(long_name, abbreviation)
            compare(f'{d}/old/{n}.sass', f'{d}/new/{n}.sass', short[:48], diff)
    else:
        compare(argv[0], argv[1], argv[1][-48:], diff)


if __name__ == '__main__':
    main(sys.argv[1:])
