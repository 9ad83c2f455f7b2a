"""From a `Stack` to objects: one module per component, what they share, the decoration every
object gets, the node's files, the GitOps objects, and the pipeline that runs them."""
