/*
 * operator/op_list.h — every registered operator, one line each. Adding an operator is
 * one new definition (a `const struct mxc__op_def mxc__op_<ident>`) plus one line here.
 * MXC__OP(ident) where the definition's .name is the MXNet name.
 */
/* element-wise, generated from scalar functions (operator/elemwise.c) */
MXC__OP(negative)
MXC__OP(abs)
MXC__OP(sign)
MXC__OP(square)
MXC__OP(sqrt)
MXC__OP(rsqrt)
MXC__OP(exp)
MXC__OP(log)
MXC__OP(sin)
MXC__OP(cos)
MXC__OP(relu)
MXC__OP(sigmoid)
MXC__OP(tanh)
MXC__OP(_plus)
MXC__OP(_minus)
MXC__OP(_mul)
MXC__OP(_div)
MXC__OP(_maximum)
MXC__OP(_minimum)
MXC__OP(_power)
MXC__OP(_plus_scalar)
MXC__OP(_minus_scalar)
MXC__OP(_rminus_scalar)
MXC__OP(_mul_scalar)
MXC__OP(_div_scalar)
MXC__OP(_rdiv_scalar)
MXC__OP(_maximum_scalar)
MXC__OP(_minimum_scalar)
MXC__OP(_power_scalar)
MXC__OP(smooth_l1)
/* neural-network layers: operator/fully_connected.c, convolution.c, pooling.c */
MXC__OP(FullyConnected)
MXC__OP(Convolution)
MXC__OP(Deconvolution)
MXC__OP(Pooling)
/* end of layers */
/* activations, normalisation, dropout: operator/activation.c, batch_norm.c, dropout.c */
MXC__OP(Activation)
MXC__OP(LeakyReLU)
MXC__OP(BatchNorm)
MXC__OP(Dropout)
/* end of activations */
/* softmax and loss outputs: operator/softmax.c, regression.c */
MXC__OP(softmax)
MXC__OP(log_softmax)
MXC__OP(SoftmaxOutput)
MXC__OP(LinearRegressionOutput)
MXC__OP(LogisticRegressionOutput)
MXC__OP(MAERegressionOutput)
/* end of losses */
/* shape, joining and lookup: operator/shape.c, concat.c, embedding.c */
MXC__OP(Flatten)
MXC__OP(Reshape)
MXC__OP(transpose)
MXC__OP(expand_dims)
MXC__OP(Concat)
MXC__OP(SliceChannel)
MXC__OP(ElementWiseSum)
MXC__OP(Embedding)
/* end of shape */
/* reductions, broadcasting, products, clip: operator/reduce.c, broadcast.c, dot.c, clip.c */
MXC__OP(sum)
MXC__OP(mean)
MXC__OP(max)
MXC__OP(broadcast_add)
MXC__OP(broadcast_sub)
MXC__OP(broadcast_mul)
MXC__OP(broadcast_div)
MXC__OP(dot)
MXC__OP(batch_dot)
MXC__OP(clip)
/* end of reduce */
/* indexing, selection and sorting: operator/indexing.c, sort.c */
MXC__OP(where)
MXC__OP(take)
MXC__OP(pick)
MXC__OP(one_hot)
MXC__OP(argmax)
MXC__OP(argmin)
MXC__OP(argmax_channel)
MXC__OP(topk)
MXC__OP(sort)
MXC__OP(argsort)
MXC__OP(gather_nd)
/* end of indexing */
/* optimizer updates: operator/optimizer.c */
MXC__OP(sgd_update)
MXC__OP(sgd_mom_update)
MXC__OP(adam_update)
/* end of optimizers */
/* testing the scheduler: operator/debug.c */
MXC__OP(_sleep)
