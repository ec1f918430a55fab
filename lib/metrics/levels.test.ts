import { describe, expect, it } from 'vitest';
import { levelScores, locationsToSets, modulesFromEntities } from './levels';

describe('file / module / function scores (CodeScout §4.2)', () => {
  it('gives precision, recall, Fβ(0.5) and F1 per level, hand-computed', () => {
    const s = levelScores(
      { files: ['a.py', 'b.py'], modules: ['a.py:A'], functions: ['a.py:A.f', 'a.py:g'] },
      { files: ['./a.py'], modules: ['a.py:A', 'a.py:B'], functions: ['a.py:A.f'] },
    );
    // file: P 1/2, R 1 → F1 2/3, Fβ 1.25·0.5/(0.125+1) = 5/9
    expect(s.file).toMatchObject({ tp: 1, fp: 1, fn: 0, precision: 0.5, recall: 1 });
    expect(s.file.f1).toBeCloseTo(2 / 3, 15);
    expect(s.file.fBeta).toBeCloseTo(5 / 9, 15);
    // module: P 1, R 1/2 → F1 2/3, Fβ 1.25·0.5/(0.25+0.5) = 5/6
    expect(s.module).toMatchObject({ tp: 1, fp: 0, fn: 1, precision: 1, recall: 0.5 });
    expect(s.module.f1).toBeCloseTo(2 / 3, 15);
    expect(s.module.fBeta).toBeCloseTo(5 / 6, 15);
    expect(s.function).toMatchObject({ tp: 1, fp: 1, fn: 0 });
    expect(s.function.fBeta).toBeCloseTo(5 / 9, 15);
  });

  it('applies the empty-set cases at each level independently', () => {
    const s = levelScores({ files: ['a.py'], modules: [], functions: [] }, { files: ['a.py'], modules: [], functions: ['a.py:f'] });
    expect(s.file.f1).toBe(1);
    expect(s.module).toMatchObject({ f1: 1, fBeta: 1 });
    expect(s.function).toMatchObject({ f1: 0, fBeta: 0, fn: 1 });
  });
});

describe('localization_finish locations → sets (CodeScout reward code)', () => {
  it('adds files, classes as modules, and Class.func / func as functions', () => {
    expect(
      locationsToSets([
        { file: 'a.py', class_name: 'A', function_name: 'f' },
        { file: 'a.py', function_name: 'g', class_name: null },
        { file: './b.py' },
        { file: 'a.py', class_name: 'A' },
        { file: '  ' },
      ]),
    ).toEqual({ files: ['a.py', 'b.py'], modules: ['a.py:A'], functions: ['a.py:A.f', 'a.py:g'] });
  });

  it('derives modules from function entities: classes only', () => {
    expect(modulesFromEntities(['a.py:A.f', 'a.py:g', 'b.py:Outer.Inner.m', 'a.py:A.h'])).toEqual(['a.py:A', 'b.py:Outer.Inner']);
  });
});
