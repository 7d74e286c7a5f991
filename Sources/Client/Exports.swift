// `import Conveyor` gives a user the pipeline types and the standard behaviors too.
@_exported public import ConveyorBehaviors
@_exported public import ConveyorPipeline
