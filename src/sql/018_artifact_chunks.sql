-- Artifact bytes in chunks (seq 0, 1, ...), so an upload is streamed into Postgres a chunk at a time instead
-- of being held whole in the API's memory, and a download reads them in order. Existing rows become chunk 0.
ALTER TABLE artifact_data ADD COLUMN seq integer NOT NULL DEFAULT 0;
ALTER TABLE artifact_data DROP CONSTRAINT artifact_data_pkey;
ALTER TABLE artifact_data ADD PRIMARY KEY (task_id, run_id, name, seq);
