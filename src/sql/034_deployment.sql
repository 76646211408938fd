-- The deployment's identity (docs/deployments.md § Several deployments): one id, generated here once, in the one row
-- of `tgs_deployment`. A database is a deployment. The scheduler worker and the bridge read it at start
-- (src/db/deployment.ts): graph workflows carry it in their memo (`tgsDeployment`), so a worker of another
-- deployment sharing the Temporal task queue never fails them for good; the claim on the Temporal task queue
-- (src/temporal/deploymentClaim.ts) and the marker exchange on RabbitMQ (src/bridge/deploymentMarker.ts) carry it so
-- that a second deployment on them refuses to start, naming the settings that separate them.
CREATE TABLE tgs_deployment (
  singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  deployment_id text NOT NULL,
  created       timestamptz NOT NULL DEFAULT now()
);
INSERT INTO tgs_deployment (deployment_id) VALUES (gen_random_uuid()::text);
