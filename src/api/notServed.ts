/**
 * The entries of taskcluster-client's Queue, Auth, Index and Hooks references that tgs does not serve, each with the reason.
 * The one list: test/api/taskclusterReference.test.ts calls every other entry through the official client (and
 * fails on an entry that is in neither; the Index's in test/api/taskclusterIndexReference.test.ts), docs/api.md § Every entry of taskcluster-client lists every entry with it.
 */
export const NOT_SERVED: Record<'Queue' | 'Auth' | 'Index' | 'Hooks', Record<string, string>> = {
  Queue: {
    claimTask:
      'Deprecated in Taskcluster and never documented; workers use claimWork. Answered with 400 InputError saying so.',
  },
  Auth: {
    awsS3Credentials: 'tgs holds no AWS credentials to hand out.',
    azureAccounts: 'tgs holds no Azure credentials to hand out.',
    azureTables: 'tgs holds no Azure credentials to hand out.',
    azureTableSAS: 'tgs holds no Azure credentials to hand out.',
    azureContainers: 'tgs holds no Azure credentials to hand out.',
    azureContainerSAS: 'tgs holds no Azure credentials to hand out.',
    gcpCredentials: 'tgs holds no GCP credentials to hand out.',
    sentryDSN: 'tgs has no Sentry projects to hand out.',
    websocktunnelToken: 'tgs runs no websocktunnel.',
  },
  // every entry of the Index reference is served
  Index: {},
  // every entry of the Hooks reference is served (test/api/hooksReference.test.ts)
  Hooks: {},
};
