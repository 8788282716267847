"""Feature gates: the kubelet's ``--feature-gates`` and ``featureGates``, checked as it does.

The kubelet knows every gate of the Kubernetes release it belongs to (its own and the
shared apiserver, client-go and component-base ones) and refuses any other name with
``unrecognized feature gate: X``. pkletd knows the union of the gates of 1.32-1.34,
plus ``AllAlpha`` and ``AllBeta``. A few gates switch features pkletd has
(``SWITCHES``); the others are accepted, recorded (``/configz`` shows them) and have
no effect, which ``config`` reports as one warning.
"""

from __future__ import annotations

SWITCHES = {
    "CSIVolumeHealth": "CSI volume conditions in the volume stats (off: never reported)",
    "EventedPLEG": "follow the runtime's events (off: relist only)",
    "GracefulNodeShutdown": "graceful node shutdown (off: shutdownGracePeriod ignored)",
    "GracefulNodeShutdownBasedOnPodPriority": (
        "shutdown by pod priority (off: shutdownGracePeriodByPodPriority ignored)"
    ),
    "ImageMaximumGCAge": "imageMaximumGCAge (off: unused images are never aged out)",
}

KNOWN = frozenset(
    """
    AllAlpha AllBeta
    AllowDNSOnlyNodeCSR AllowInsecureKubeletCertificateSigningRequests
    AllowOverwriteTerminationGracePeriodSeconds AnyVolumeDataSource AppArmor AppArmorFields
    AuthorizeNodeWithSelectors AuthorizePodWebsocketUpgradeCreatePermission
    CPUManagerPolicyAlphaOptions CPUManagerPolicyBetaOptions CPUManagerPolicyOptions
    CSIMigrationPortworx CSIServiceAccountTokenSecrets CSIVolumeHealth
    ChangeContainerStatusOnKubeletRestart ClearingNominatedNodeNameAfterBinding
    CloudDualStackNodeIPs ClusterTrustBundle ClusterTrustBundleProjection
    ContainerCheckpoint ContainerRestartRules ContainerStopSignals
    CoordinatedLeaderElection CrossNamespaceVolumeDataSource CustomCPUCFSQuotaPeriod
    DRAAdminAccess DRAConsumableCapacity DRADeviceBindingConditions DRADeviceTaintRules
    DRADeviceTaints DRAExtendedResource DRAPartitionableDevices DRAPrioritizedList
    DRAResourceClaimDeviceStatus DRASchedulerFilterTimeout
    DeploymentReplicaSetTerminatingReplicas DevicePluginCDIDevices
    DisableAllocatorDualWrite DisableCPUQuotaWithExclusiveCPUs DisableCloudProviders
    DisableKubeletCloudCredentialProviders DisableNodeKubeProxyVersion
    DynamicResourceAllocation ElasticIndexedJob EnvFiles EventedPLEG ExecProbeTimeout
    ExternalServiceAccountTokenSigner GitRepoVolumeDriver GracefulNodeShutdown
    GracefulNodeShutdownBasedOnPodPriority HPAConfigurableTolerance HPAScaleToZero
    HonorPVReclaimPolicy HostnameOverride ImageMaximumGCAge ImageVolume
    InPlacePodVerticalScaling InPlacePodVerticalScalingAllocatedStatus
    InPlacePodVerticalScalingExclusiveCPUs InPlacePodVerticalScalingExclusiveMemory
    InTreePluginPortworxUnregister JobBackoffLimitPerIndex JobManagedBy
    JobPodFailurePolicy JobPodReplacementPolicy JobSuccessPolicy
    KubeProxyDrainingTerminatingNodes KubeletCgroupDriverFromCRI
    KubeletCrashLoopBackOffMax KubeletEnsureSecretPulledImages KubeletFineGrainedAuthz
    KubeletInUserNamespace KubeletPSI KubeletPodResourcesDynamicResources
    KubeletPodResourcesGet KubeletPodResourcesListUseActivePods
    KubeletRegistrationGetOnExistsOnly KubeletSeparateDiskGC
    KubeletServiceAccountTokenForCredentialProviders KubeletTracing
    LegacySidecarContainers LoadBalancerIPMode LocalStorageCapacityIsolationFSQuotaMonitoring
    LogarithmicScaleDown MatchLabelKeysInPodAffinity MatchLabelKeysInPodTopologySpread
    MatchLabelKeysInPodTopologySpreadSelectorMerge MaxUnavailableStatefulSet MemoryManager
    MemoryQoS MultiCIDRServiceAllocator MutableCSINodeAllocatableCount NFTablesProxyMode
    NodeInclusionPolicyInPodTopologySpread NodeLogQuery NodeSwap
    NominatedNodeNameForExpectation OrderedNamespaceDeletion PodAndContainerStatsFromCRI
    PodCertificateRequest PodDeletionCost PodDisruptionConditions PodIndexLabel
    PodLevelResources PodLifecycleSleepAction PodLifecycleSleepActionAllowZero
    PodLogsQuerySplitStreams PodObservedGenerationTracking
    PodReadyToStartContainersCondition PodSchedulingReadiness PodTopologyLabelsAdmission
    PortForwardWebsockets PreferSameTrafficDistribution PreventStaticPodAPIReferences
    ProcMountType QOSReserved RecoverVolumeExpansionFailure RecursiveReadOnlyMounts
    ReduceDefaultCrashLoopBackOffDecay RelaxedDNSSearchValidation
    RelaxedEnvironmentVariableValidation RelaxedServiceNameValidation
    ReloadKubeletServerCertificateFile ResourceHealthStatus RotateKubeletServerCertificate
    RuntimeClassInImageCriApi SELinuxChangePolicy SELinuxMount SELinuxMountReadWriteOncePod
    SchedulerAsyncAPICalls SchedulerAsyncPreemption SchedulerPopFromBackoffQ
    SchedulerQueueingHints SeparateTaintEvictionController
    ServiceAccountNodeAudienceRestriction ServiceAccountTokenJTI
    ServiceAccountTokenNodeBinding ServiceAccountTokenNodeBindingValidation
    ServiceAccountTokenPodNodeInfo ServiceTrafficDistribution SidecarContainers
    SizeMemoryBackedVolumes StatefulSetAutoDeletePVC StorageCapacityScoring
    StorageNamespaceIndex StorageVersionMigrator StreamingCollectionEncodingToJSON
    StreamingCollectionEncodingToProtobuf StrictIPCIDRValidation SupplementalGroupsPolicy
    SystemdWatchdog TopologyAwareHints TopologyManagerPolicyAlphaOptions
    TopologyManagerPolicyBetaOptions TopologyManagerPolicyOptions
    TranslateStreamCloseWebsocketRequests UserNamespacesPodSecurityStandards
    UserNamespacesSupport VolumeAttributesClass VolumeCapacityPriority WinDSR WinOverlay
    WindowsCPUAndMemoryAffinity WindowsGracefulNodeShutdown WindowsHostNetwork
    APIResponseCompression APIServerIdentity APIServerTracing APIServingWithRoutine
    AggregatedDiscoveryRemoveBetaType AllowParsingUserUIDFromCertAuth
    AllowUnsafeMalformedObjectDeletion AnonymousAuthConfigurableEndpoints
    AuthorizeWithSelectors BtreeWatchCache CBORServingAndStorage
    ConcurrentWatchObjectDecode ConsistentListFromCache DetectCacheInconsistency KMSv1
    ListFromCacheSnapshot MutatingAdmissionPolicy OpenAPIEnums RemoteRequestHeaderUID
    ResilientWatchCacheInitialization RetryGenerateName SeparateCacheWatchRPC
    SizeBasedListCostEstimate StorageVersionAPI StorageVersionHash
    StrictCostEnforcementForVAP StrictCostEnforcementForWebhooks
    StructuredAuthenticationConfiguration StructuredAuthorizationConfiguration
    TokenRequestServiceAccountUIDValidation UnauthenticatedHTTP2DOSMitigation
    UnknownVersionInteroperabilityProxy WatchCacheInitializationPostStartHook
    WatchFromStorageWithoutResourceVersion WatchList ClientsAllowCBOR ClientsPreferCBOR
    InformerResourceVersion InOrderInformers WatchListClient ComponentSLIs
    ComponentFlagz ComponentStatusz ContextualLogging LoggingAlphaOptions
    LoggingBetaOptions CRDValidationRatcheting CustomResourceFieldSelectors
    CloudControllerManagerWebhook CloudControllerManagerWatchBasedRoutesReconciliation
""".split()
)


def check(gates: dict[str, bool]) -> None:
    """ValueError with the kubelet's message for the first unknown gate (sorted)."""
    for name in sorted(gates):
        if name not in KNOWN:
            raise ValueError(f"unrecognized feature gate: {name}")


def parse_flag(text: str) -> dict[str, bool]:
    """``--feature-gates`` text, ``A=true,B=false``, as the kubelet's map-of-bool flag
    reads it (spaces around names and values allowed, an empty item skipped)."""
    found: dict[str, bool] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, equals, value = item.partition("=")
        if not equals:
            raise ValueError(f"missing bool value for {name.strip()}")
        value = value.strip().lower()
        if value not in ("true", "false", "1", "0", "t", "f"):
            raise ValueError(f"invalid value of {name.strip()}: {value}, err: invalid syntax")
        found[name.strip()] = value in ("true", "1", "t")
    return found


def enabled(gates: tuple[tuple[str, bool], ...], name: str) -> bool | None:
    """The gate's value when it was set, else None (the feature's own default holds)."""
    return next((value for gate, value in gates if gate == name), None)
