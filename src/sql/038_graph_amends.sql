-- One row per amend of a graph (docs/formats.md § Amend): who, when, and what each label was classified as, so a
-- graph's history shows why a node was replaced.
CREATE TABLE graph_amends (
  task_graph_id text NOT NULL REFERENCES task_graphs ON DELETE CASCADE,
  seq           integer NOT NULL,
  created       timestamptz NOT NULL DEFAULT now(),
  who           text NOT NULL,
  -- {changed: [labels], metadata: [...], added: [...], removed: [...], dependents: [...], unchanged: count}
  summary       jsonb NOT NULL,
  PRIMARY KEY (task_graph_id, seq)
);
