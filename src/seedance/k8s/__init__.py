"""Kubernetes integration: scheduler extender, TrainingJob operator, CRDs, manifests and Helm chart.

Layout (imports only go downwards; nothing here imports ``kubernetes`` or ``kopf`` at module import
except :mod:`seedance.k8s.controller`, :mod:`seedance.k8s.kubeapi` and :mod:`seedance.k8s.informer`):

* :mod:`~seedance.k8s.keys`: label, annotation and resource names Seedance reads and writes.
* :mod:`~seedance.k8s.quantity`: exact parsing of Kubernetes resource quantities.
* :mod:`~seedance.k8s.objects`: Node / Pod documents → ``NodeSpec`` / ``ResourceRequest``.
* :mod:`~seedance.k8s.affinity`: nodeAffinity / nodeSelector evaluation against node labels.
* :mod:`~seedance.k8s.render`: the SLA-tier Pod fragment (nodeAffinity, tolerations, priority class).
* :mod:`~seedance.k8s.extender`: kube-scheduler extender (filter, prioritize, bind) over ``Scheduler``.
* :mod:`~seedance.k8s.server`: the extender's HTTP server (stdlib, keep-alive).
* :mod:`~seedance.k8s.crds`, :mod:`~seedance.k8s.manifests`: CRDs and deployment manifests as data.
* :mod:`~seedance.k8s.trainingjob`: pure TrainingJob → Pods reconciliation; ``controller``: kopf wiring.
* :mod:`~seedance.k8s.validation`: offline validation against the Kubernetes OpenAPI schemas.
"""
