"""The node's image credential provider plugins, as the kubelet's
``pkg/credentialprovider/plugin``.

``providerconfig`` reads and checks the ``CredentialProviderConfig`` named by
``--image-credential-provider-config`` (and finds each plugin's executable under
``--image-credential-provider-bin-dir``); ``execplugin`` runs one plugin with a
``CredentialProviderRequest`` and reads its ``CredentialProviderResponse``; ``providers``
matches images to providers, caches their answers by ``cacheKeyType`` and
``cacheDuration`` and gives the pod logic the node's credentials for an image
(``pods.keyring.NodeCredentials``), tried after the pod's pull secrets.
"""
